// String helpers shared by every folder (file-name suffixes).
#pragma once

#include <cctype>
#include <string_view>

namespace shardify {

// Whether `s` ends with `suffix` (byte for byte).
inline bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Whether `s` ends with `suffix`, a lower-case ASCII string, whatever the case of `s`'s
// letters ("SCAN.NII.GZ" ends with ".nii.gz").
inline bool EndsWithNoCase(std::string_view s, std::string_view suffix) {
  if (s.size() < suffix.size()) return false;
  const std::string_view tail = s.substr(s.size() - suffix.size());
  for (size_t i = 0; i < suffix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(tail[i])) != static_cast<unsigned char>(suffix[i])) return false;
  }
  return true;
}

}  // namespace shardify
