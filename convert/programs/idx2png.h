// Writes an idx images + labels pair as class-folder PNGs: OUT/<class>/<index>.png, the
// folder layout users have (used by the README demo on Fashion-MNIST).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace shardify::convert {

struct IdxToPngOptions {
  std::string images;                // *-images-idx3-ubyte[.gz], u8 [N, H, W] or [N, H, W, C]
  std::string labels;                // *-labels-idx1-ubyte[.gz], u8 [N]
  std::string out;                   // output directory (created)
  std::vector<std::string> classes;  // folder name of label i ('/' becomes '_'); empty: the number
  std::string prefix;                // file name prefix, e.g. "test-" (keeps names unique)
  uint64_t limit = 0;                // first N images only; 0: all
  int threads = 1;
  const std::atomic<bool>* cancel = nullptr;
};

// File names are the prefix and the 0-based index in the idx file, 5 digits ("00042.png").
// Returns the number of files written.
Result<uint64_t> IdxToPng(const IdxToPngOptions& options);

}  // namespace shardify::convert
