// auto's sources stay in short functions (docs/auto.md "The stages"): every function body in
// src/runtime/auto/ and the StragglerPolicy façade is at most 60 lines. A brace counter, not a
// parser: comments and string literals are dropped, and a '{' opens a function when the text
// before it (since the last ';', '{' or '}') has a parameter list and is not a control statement,
// a type or a namespace.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#ifndef STRAGGLAR_SOURCE_DIR
#error "STRAGGLAR_SOURCE_DIR: the repository's root (tests/unit/CMakeLists.txt)"
#endif

namespace {

constexpr int kMaxLines = 60;

// The file without comments and with empty string and character literals; newlines kept.
std::string code_of(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string s = ss.str();
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s.compare(i, 2, "//") == 0) {
      while (i < s.size() && s[i] != '\n') ++i;
      if (i < s.size()) out += '\n';
    } else if (s[i] == '"' || s[i] == '\'') {
      const char q = s[i];
      for (++i; i < s.size() && s[i] != q; ++i)
        if (s[i] == '\\') ++i;
      out += "\"\"";
    } else {
      out += s[i];
    }
  }
  return out;
}

bool opens_function(const std::string& head) {
  const std::size_t paren = head.find('(');
  if (paren == std::string::npos) return false;
  const std::string before = head.substr(0, paren);
  // A control keyword as a whole word before the parenthesis: not a function. (No std::regex:
  // GCC 12 warns inside it under the sanitizer build's -Werror.)
  static const std::array<std::string_view, 11> control = {"if",    "for",       "while",  "switch", "else", "do",
                                                           "catch", "namespace", "struct", "class",  "enum"};
  const auto word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (std::size_t i = 0; i < before.size();) {
    if (!word_char(before[i])) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < before.size() && word_char(before[j])) ++j;
    if (std::find(control.begin(), control.end(), std::string_view(before).substr(i, j - i)) != control.end())
      return false;
    i = j;
  }
  return before.find('=') == std::string::npos;
}

struct Function {
  std::string where;
  int lines;
};

std::vector<Function> functions_of(const std::filesystem::path& path) {
  const std::string s = code_of(path);
  std::vector<Function> out;
  struct Open {
    bool function;
    int line;
  };
  std::vector<Open> stack;
  std::size_t statement = 0;
  int line = 1;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\n') ++line;
    if (s[i] == '{') {
      bool inside = false;
      for (const Open& o : stack) inside = inside || o.function;
      stack.push_back({!inside && opens_function(s.substr(statement, i - statement)), line});
      statement = i + 1;
    } else if (s[i] == '}' && !stack.empty()) {
      const Open o = stack.back();
      stack.pop_back();
      if (o.function) out.push_back({path.filename().string() + ":" + std::to_string(o.line), line - o.line + 1});
      statement = i + 1;
    } else if (s[i] == ';') {
      statement = i + 1;
    }
  }
  return out;
}

TEST(PolicySources, NoFunctionOverSixtyLines) {
  const std::filesystem::path root = STRAGGLAR_SOURCE_DIR;
  std::vector<std::filesystem::path> files{root / "src/runtime/straggler_policy.cpp",
                                           root / "src/runtime/straggler_policy.hpp"};
  for (const auto& entry : std::filesystem::directory_iterator(root / "src/runtime/auto")) files.push_back(entry.path());
  int seen = 0;
  for (const auto& f : files)
    for (const Function& fn : functions_of(f)) {
      ++seen;
      EXPECT_LE(fn.lines, kMaxLines) << "the function at " << fn.where << " has " << fn.lines << " lines";
    }
  EXPECT_GT(seen, 50) << "the brace counter found too few functions: it is broken";
}

}  // namespace
