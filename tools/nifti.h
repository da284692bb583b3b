// Writing NIfTI-1 / NIfTI-2 files from a stored header and native voxels, without ITK.
//
// The format keeps a volume's source header bytes (field "<f>.nifti_header") and its
// voxels in native little-endian order. BuildNiftiImage puts both back together so the
// file equals the source voxel for voxel: the header is written unchanged, zero bytes
// fill up to vox_offset (source extensions are not kept), and voxels are byte-swapped
// back when the header is big-endian. The header itself (parsing, making one, retyping
// it) is media/nifti.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/types.h"

namespace shardify::tools {

// The complete file image (not compressed): `header` (a pair header is turned into a
// single-file one: magic "n+1"/"n+2" and vox_offset 352/544), zero padding, then
// `voxels` in the header's byte order. `header` must pass media::ParseStoredNiftiHeader;
// `voxels` must hold exactly its voxel bytes of elements of `dtype`, whose size must
// equal bitpix / 8.
Result<std::vector<uint8_t>> BuildNiftiImage(const std::vector<uint8_t>& header, const uint8_t* voxels, size_t size,
                                             DType dtype);

// Writes `image` to `path` atomically (temporary file, then rename); gzip when `path`
// ends in ".gz". Errors name the path.
Status WriteMaybeGzipped(const std::string& path, const std::vector<uint8_t>& image);

}  // namespace shardify::tools
