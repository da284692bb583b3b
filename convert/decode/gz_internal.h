// Reading plain or gzip-compressed files through zlib (internal).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"

struct gzFile_s;

namespace shardify::convert::detail {

struct GzCloser {
  void operator()(gzFile_s* f) const;
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

// Reads up to n bytes; fewer only where the stream ends. A damaged stream is a
// Corruption naming `path` and `what` is being read.
Result<uint64_t> GzReadUpTo(gzFile_s* f, uint8_t* dst, uint64_t n, const std::string& path, const char* what);

// Deflate (gzip, zlib, PNG) never expands more than 1032:1 (a 258-byte match costs at
// least 2 bits), so a file of S bytes decompresses to at most 1032 * S bytes.
inline constexpr uint64_t kMaxDeflateRatio = 1032;

// Checks, before anything is allocated for it, that the file `path` (open as `f`) can
// hold `bytes` of data starting at uncompressed offset `offset`: a plain file must be that
// long, a compressed one must be large enough to inflate to it. `what` names the data in
// the Corruption error.
Status CheckFileCanHold(const std::string& path, gzFile_s* f, uint64_t offset, uint64_t bytes, const char* what);

}  // namespace shardify::convert::detail
