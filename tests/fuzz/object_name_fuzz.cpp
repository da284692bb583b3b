// Fuzz target: names from outside on their way into paths, URLs and messages. For any
// bytes: a name IsRelativeName takes stays inside its folder (std::filesystem's lexical
// normal form leaves the joined path as it is); ObjectUrl puts it after the location's
// path with nothing a client or server reads as syntax (only unreserved bytes, '/' and
// %XX, which decode back to the name); ShownLocation never shows a query's bytes; and
// OriginOf never fails.
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "base/file.h"
#include "storage/location.h"

using namespace shardify;

namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  return c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

// `encoded` decoded, or "\x01" plus the text when it holds a byte that should have been encoded.
std::string Decoded(const std::string& encoded) {
  std::string out;
  for (size_t i = 0; i < encoded.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(encoded[i]);
    if (c == '%' && i + 2 < encoded.size() && HexDigit(encoded[i + 1]) >= 0 && HexDigit(encoded[i + 2]) >= 0) {
      out += static_cast<char>(HexDigit(encoded[i + 1]) * 16 + HexDigit(encoded[i + 2]));
      i += 2;
    } else if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') {
      out += static_cast<char>(c);
    } else {
      return "\x01" + encoded;
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string name(reinterpret_cast<const char*>(data), size);
  if (IsRelativeName(name)) {
    const std::string path = "/stage/" + name;
    if (std::filesystem::path(path).lexically_normal().string() != path) std::abort();
  }
  const Result<storage::Location> at = storage::ParseLocation("http://127.0.0.1:8000/sets/ds?sig=token");
  if (!at.ok()) std::abort();
  const std::string url = storage::ObjectUrl(*at, name);
  const std::string head = "http://127.0.0.1:8000/sets/ds/", tail = "?sig=token";
  if (url.compare(0, head.size(), head) != 0 || url.compare(url.size() - tail.size(), tail.size(), tail) != 0) {
    std::abort();
  }
  if (Decoded(url.substr(head.size(), url.size() - head.size() - tail.size())) != name) std::abort();
  if (!name.empty() && storage::ShownLocation("https://h/p?" + name) != "https://h/p?...") std::abort();
  storage::OriginOf(name);
  storage::OriginOf("http://" + name);
  storage::ShownLocation(name);
  return 0;
}
