#include <zlib.h>

#include <algorithm>

#include "convert/gz_internal.h"

namespace shardify::convert::detail {

void GzCloser::operator()(gzFile_s* f) const { gzclose(f); }

Result<uint64_t> GzReadUpTo(gzFile_s* f, uint8_t* dst, uint64_t n, const std::string& path, const char* what) {
  uint64_t done = 0;
  while (done < n) {
    const auto chunk = static_cast<unsigned>(std::min<uint64_t>(n - done, 1u << 30));
    const int got = gzread(f, dst + done, chunk);
    if (got < 0) {
      int err = 0;
      const char* msg = gzerror(f, &err);
      return Corruption(path + ": cannot read " + what + ": " + (msg ? msg : "bad gzip stream"));
    }
    if (got == 0) break;
    done += static_cast<uint64_t>(got);
  }
  return done;
}

}  // namespace shardify::convert::detail
