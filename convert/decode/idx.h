// MNIST-style idx files (.gz or plain): magic 0 0 <type> <rank>, big-endian u32 sizes,
// then the big-endian elements. Used by the idx layout and by idx2png.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/types.h"

namespace shardify::convert {

struct IdxArray {
  DType dtype = DType::kU8;
  Shape shape;                // outermost first, e.g. [60000, 28, 28]
  std::vector<uint8_t> data;  // elements, little-endian
};

// Reads a whole idx file; refuses a bad magic, an unknown type code, sizes that overflow
// or exceed `max_bytes`, and data shorter or longer than the sizes say. Errors name `path`.
Result<IdxArray> ReadIdx(const std::string& path, uint64_t max_bytes = 8ull << 30);

// True for names like "train-images-idx3-ubyte" or "t10k-labels-idx1-ubyte.gz".
bool IsIdxName(const std::string& file_name);

}  // namespace shardify::convert
