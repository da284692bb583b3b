// Reading plain or gzip-compressed files through zlib (internal).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "format/status.h"

struct gzFile_s;

namespace shardify::convert::detail {

struct GzCloser {
  void operator()(gzFile_s* f) const;
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

// Reads up to n bytes; fewer only where the stream ends. A damaged stream is a
// Corruption naming `path` and `what` is being read.
Result<uint64_t> GzReadUpTo(gzFile_s* f, uint8_t* dst, uint64_t n, const std::string& path, const char* what);

}  // namespace shardify::convert::detail
