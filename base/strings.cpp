#include "base/strings.h"

#include <cerrno>
#include <cstdint>
#include <cstdlib>

namespace shardify {

Result<uint64_t> ParseByteSize(const std::string& text) {
  const Status bad = InvalidArgument("'" + text + "' is not a size like 268435456, 256M or 1G");
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return bad;
  uint64_t mult = 1;
  std::string num = text;
  const char last = static_cast<char>(std::toupper(static_cast<unsigned char>(text.back())));
  if (last == 'K' || last == 'M' || last == 'G' || last == 'T') {
    num.pop_back();
    mult = last == 'K' ? 1ull << 10 : last == 'M' ? 1ull << 20 : last == 'G' ? 1ull << 30 : 1ull << 40;
  }
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(num.c_str(), &end, 10);
  if (num.empty() || errno != 0 || end != num.c_str() + num.size() || v == 0 || v > UINT64_MAX / mult) return bad;
  return static_cast<uint64_t>(v) * mult;
}

}  // namespace shardify
