#pragma once
// Minimal command-line parsing shared by the driver and perf tests:
// "--name value", "-x value" and boolean "--flag"; unknown options are errors.

#include <DistAttn/core/error.hpp>

#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace DistAttn::Perf {

class Args {
 public:
  Args(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a.size() < 2 || a[0] != '-') throw InvalidArgument("unexpected argument '" + a + "'");
      if (i + 1 < argc && (argv[i + 1][0] != '-' || is_number(argv[i + 1]))) {
        values_[a] = argv[++i];
      } else {
        values_[a] = "";
      }
    }
  }

  /// Value of the first of `names` present, else `def`. Records the names as known.
  std::string str(std::initializer_list<const char*> names, const std::string& def) {
    for (const char* n : names) {
      known_.insert(n);
      auto it = values_.find(n);
      if (it != values_.end()) return it->second;
    }
    return def;
  }
  long integer(std::initializer_list<const char*> names, long def) {
    const std::string s = str(names, "");
    if (s.empty()) return def;
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    long mult = 1;
    if (end && (*end == 'K' || *end == 'k')) mult = 1024;
    else if (end && (*end == 'M' || *end == 'm')) mult = 1024 * 1024;
    else if (end && *end != '\0') throw InvalidArgument("option " + std::string(*names.begin()) + ": '" + s + "' is not a number");
    return long(v * double(mult));
  }
  double real(std::initializer_list<const char*> names, double def) {
    const std::string s = str(names, "");
    if (s.empty()) return def;
    return std::stod(s);
  }
  bool flag(std::initializer_list<const char*> names) {
    for (const char* n : names) {
      known_.insert(n);
      auto it = values_.find(n);
      if (it != values_.end()) return it->second.empty() || it->second == "1" || it->second == "true";
    }
    return false;
  }
  /// Throws for any option that no accessor asked about (typos must not pass silently).
  void reject_unknown() const {
    for (const auto& kv : values_)
      if (!known_.count(kv.first)) throw InvalidArgument("unknown option '" + kv.first + "'");
  }

 private:
  static bool is_number(const char* s) { return (s[0] == '-' && s[1] >= '0' && s[1] <= '9'); }
  std::map<std::string, std::string> values_;
  std::set<std::string> known_;
};

}  // namespace DistAttn::Perf
