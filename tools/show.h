// shardtool show: everything stored for one sample.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "base/status.h"
#include "format/dataset.h"

namespace shardify::tools {

struct ShowOptions {
  IoMode io = IoMode::kMmap;   // how shards are read (--io mmap|pread)
  bool json = false;           // {sample, split, shard, fields [{name, kind, ...}]}
  bool preview = true;         // text: a character-art preview of the image field
  uint32_t preview_cols = 56;  // preview width in characters (>= 8)
};

// Writes every field of sample `index`: ndarrays with dtype, shape, codec, stored and raw
// bytes, checksum, and their values when small (geometry); ints (labels with their class
// name), floats, strings, bytes (a NIfTI header is summarised: dims, datatype, pixdim,
// qform/sform codes); then a text preview of a 2D image or the middle slice of a volume.
// Errors: OutOfRange for an index past the end; decode errors name the sample and field.
Status RunShow(const std::string& dir, uint64_t index, const ShowOptions& options, std::ostream& out);

}  // namespace shardify::tools
