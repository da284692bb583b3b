#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "convert/decode/gz_internal.h"

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

Status CheckFileCanHold(const std::string& path, gzFile_s* f, uint64_t offset, uint64_t bytes, const char* what) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return IOError(path + ": cannot stat: " + std::strerror(errno));
  const auto size = static_cast<uint64_t>(st.st_size);
  const bool plain = gzdirect(f) != 0;
  const uint64_t room = plain ? (size > offset ? size - offset : 0)
                              : (size > UINT64_MAX / kMaxDeflateRatio ? UINT64_MAX : size * kMaxDeflateRatio);
  if (bytes <= room && (plain || offset <= room - bytes)) return Status::Ok();
  if (plain) {
    return Corruption(path + ": truncated " + what + ": the header claims " + std::to_string(bytes) +
                      " bytes from offset " + std::to_string(offset) + ", but the file has only " +
                      std::to_string(size) + " bytes");
  }
  return Corruption(path + ": the header claims " + std::to_string(bytes) + " bytes of " + what +
                    ", but the file has only " + std::to_string(size) + " bytes, compressed (inflating at most " +
                    std::to_string(kMaxDeflateRatio) + "x)");
}

}  // namespace shardify::convert::detail
