// Environment variables set for a test's scope: the variables `names` take the values in
// `set` (those it leaves out are unset) while the object lives, then get back what they had.
#pragma once

#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace shardify::testing {

class ScopedEnvironment {
 public:
  ScopedEnvironment(const std::vector<std::string>& names, const std::map<std::string, std::string>& set) {
    for (const std::string& name : names) {
      const char* old = std::getenv(name.c_str());
      saved_[name] = old != nullptr ? std::optional<std::string>(old) : std::nullopt;
      const auto it = set.find(name);
      if (it != set.end()) {
        ::setenv(name.c_str(), it->second.c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }
  ~ScopedEnvironment() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }
  ScopedEnvironment(const ScopedEnvironment&) = delete;
  ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

}  // namespace shardify::testing
