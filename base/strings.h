// String helpers shared by every folder (file-name suffixes, lists, UTF-8).
#pragma once

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace shardify {

// The value of environment variable `name`; "" when it is unset.
inline std::string EnvValue(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

// Whether `s` ends with `suffix` (byte for byte).
inline bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// `s` with its ASCII letters in lower case (other bytes as they are).
inline std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
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

// The items of a comma-separated list, empty ones kept ("a,,b" -> a, "", b; "a," -> a, "");
// an empty text has none.
inline std::vector<std::string> SplitComma(std::string_view text) {
  std::vector<std::string> out;
  if (text.empty()) return out;
  for (size_t at = 0;;) {
    const size_t comma = text.find(',', at);
    out.emplace_back(text.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at));
    if (comma == std::string_view::npos) return out;
    at = comma + 1;
  }
}

// The length of the well-formed UTF-8 sequence at the start of `s` (1 to 4 bytes; no
// overlong forms, surrogates or code points past U+10FFFF), or 0 when there is none.
inline size_t Utf8SequenceLength(std::string_view s) {
  if (s.empty()) return 0;
  const auto b = [&s](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  const size_t n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
  if (n == 0 || s.size() < n) return 0;
  for (size_t i = 1; i < n; ++i) {
    if ((b(i) & 0xC0) != 0x80) return 0;
  }
  if ((c == 0xE0 && b(1) < 0xA0) || (c == 0xED && b(1) > 0x9F) || (c == 0xF0 && b(1) < 0x90) ||
      (c == 0xF4 && b(1) > 0x8F)) {
    return 0;
  }
  return n;
}

// Whether `s` is well-formed UTF-8 (what JSON, Python's str and the manifest's names need).
inline bool IsUtf8(std::string_view s) {
  for (size_t n = 0; !s.empty(); s.remove_prefix(n)) {
    if ((n = Utf8SequenceLength(s)) == 0) return false;
  }
  return true;
}

// `s` for a message: every byte that is not part of well-formed UTF-8 written as \xHH
// ("caf\xE9"), and with `controls` every control character too (below 0x20, and 0x7F:
// "a\x0Ab"), the rest as it is.
inline std::string EscapeNonUtf8(std::string_view s, bool controls = false) {
  std::string out;
  while (!s.empty()) {
    size_t n = Utf8SequenceLength(s);
    const unsigned char c = static_cast<unsigned char>(s[0]);
    if (n == 0 || (controls && (c < 0x20 || c == 0x7F))) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02X", static_cast<unsigned char>(s[0]));
      out += hex;
      n = 1;
    } else {
      out.append(s.data(), n);
    }
    s.remove_prefix(n);
  }
  return out;
}

// "268435456", "256M", "1G", "64k": bytes, or with a K, M, G or T suffix (powers of 1024).
Result<uint64_t> ParseByteSize(const std::string& text);

}  // namespace shardify
