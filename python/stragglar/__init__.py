"""stragglar: straggler-aware AllReduce (README.md) — the Python side.

Submodules, each imported on its own so that none drags in another's dependencies:

- ``stragglar.draw``: a ``stragglar-schedule/1`` schedule drawn as ranks x rounds
  (``python3 -m stragglar.draw SCHEDULE.json -o out.png``); needs matplotlib.
- ``stragglar.figures``: the README's figures from ``stragglar simulate --format json`` and
  ``stragglar-bench --json`` (``python3 -m stragglar.figures --help``); needs matplotlib.

This root module imports nothing heavy (no matplotlib, no torch), so ``import stragglar`` is
cheap wherever the package is on the path.
"""
