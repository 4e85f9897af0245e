#!/usr/bin/env bash
# Fails when the repository points outside itself or at a file it does not have, because whoever
# clones it meets those links dead:
#   1. references to files that are not part of the project: docs/design.md, shared/paper/...,
#      shared/DEVICE.md, ../shared, absolute /work/ paths (in every tracked text file);
#   2. relative links in README.md and docs/**/*.md whose file, or #anchor (GitHub's heading
#      slugs), does not exist.
# The paper is cited by title and public address instead (docs/design.md).
#
#   bash scripts/check-no-outside-links.sh [REPO_ROOT]     exit 0: clean; 1: prints file:line of each
set -euo pipefail
root=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
cd "$root"

status=0

# 1. References out of the repository. This script names the patterns, so it is left out.
pattern='DESIGN\.md|shared/paper|shared/DEVICE\.md|\.\./shared|(^|[^A-Za-z0-9_.~-])/work/'
if git rev-parse --git-dir >/dev/null 2>&1; then
  files=$(git ls-files | grep -v '^scripts/check-no-outside-links\.sh$' || true)
else
  files=$(find . -type f -not -path './.git/*' -not -path './build*' -not -path './scripts/check-no-outside-links.sh' | sed 's|^\./||')
fi
if [[ -n "$files" ]]; then
  # -I: text files only; one line per hit, file:line:text. xargs may run grep several times, and
  # grep exits 1 where a batch has no hit, so the output decides, not the exit status.
  hits=$(printf '%s\n' "$files" | tr '\n' '\0' | xargs -0 grep -nIE "$pattern" -- 2>/dev/null || true)
  if [[ -n "$hits" ]]; then
    echo "references to files outside the repository (cite the paper by title and address; link docs/ instead):"
    printf '%s\n' "$hits"
    status=1
  fi
fi

# 2. Relative links in the Markdown pages.
python3 - "$root" <<'EOF' || status=1
import os, re, sys

root = sys.argv[1]
pages = ["README.md"] + sorted(
    os.path.join(d, f) for d, _, fs in os.walk("docs") for f in fs if f.endswith(".md"))

def strip_code(text):
    """Drops fenced blocks and inline code spans, keeping line numbers."""
    out, fenced = [], False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            out.append("")
            continue
        out.append("" if fenced else re.sub(r"`[^`]*`", "", line))
    return out

def slugs(path):
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to '-', repeats -1, -2."""
    seen, result = {}, set()
    for line in strip_code_headings(path):
        s = re.sub(r"[^\w\- ]", "", line.lower(), flags=re.UNICODE).replace(" ", "-")
        n = seen.get(s, 0)
        seen[s] = n + 1
        result.add(s if n == 0 else f"{s}-{n}")
    return result

def strip_code_headings(path):
    fenced = False
    for line in open(path, encoding="utf-8"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            yield line.lstrip("#").strip()

bad = []
link = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
for page in pages:
    if not os.path.exists(page):
        continue
    for lineno, line in enumerate(strip_code(open(page, encoding="utf-8").read()), 1):
        for target in link.findall(line):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            if not os.path.exists(dest):
                bad.append(f"{page}:{lineno}: {target}: no file {dest}")
            elif anchor and dest.endswith(".md") and anchor not in slugs(dest):
                bad.append(f"{page}:{lineno}: {target}: no heading #{anchor} in {dest}")
if bad:
    print("relative links that do not resolve:")
    print("\n".join(bad))
    sys.exit(1)
EOF

exit "$status"
