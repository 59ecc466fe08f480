// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Keeps docs/api.md honest: every line of a ```cpp block that starts with
// "// from <file>" must appear (ignoring surrounding spaces) in that file, except
// lines starting with "// ..." (elisions). Fails naming the first line that does not.
#include <fstream>
#include <iostream>
#include <set>
#include <string>

namespace {
std::string trim(const std::string& s) {
  const auto a = s.find_first_not_of(" \t");
  const auto b = s.find_last_not_of(" \t\r");
  return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: doc_snippets <docs/api.md> <source dir>\n";
    return 2;
  }
  std::ifstream doc(argv[1]);
  if (!doc) {
    std::cerr << "cannot read " << argv[1] << '\n';
    return 2;
  }
  std::string line, file;
  std::set<std::string> lines;
  bool in_block = false, checking = false;
  int blocks = 0, checked = 0, bad = 0, n = 0;
  while (std::getline(doc, line)) {
    ++n;
    const std::string t = trim(line);
    if (!in_block && t == "```cpp") {
      in_block = true, checking = false;
      continue;
    }
    if (in_block && t == "```") {
      in_block = false;
      continue;
    }
    if (!in_block) continue;
    if (!checking && t.rfind("// from ", 0) == 0) {
      file = t.substr(8);
      std::ifstream src(std::string(argv[2]) + "/" + file);
      if (!src) {
        std::cerr << argv[1] << ':' << n << ": names " << file << ", which does not exist\n";
        return 1;
      }
      lines.clear();
      for (std::string s; std::getline(src, s);) lines.insert(trim(s));
      checking = true, ++blocks;
      continue;
    }
    if (!checking || t.empty() || t.rfind("// ...", 0) == 0) continue;
    ++checked;
    if (!lines.count(t)) {
      std::cerr << argv[1] << ':' << n << ": not in " << file << ": " << t << '\n';
      ++bad;
    }
  }
  std::cout << checked << " lines of " << blocks << " code blocks checked, " << bad << " not found\n";
  return bad == 0 && blocks > 0 ? 0 : 1;
}
