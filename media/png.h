// A minimal PNG encoder (8- or 16-bit gray, gray+alpha, RGB, RGBA), for plots, contact
// sheets and image export. Deterministic: the same pixels give the same bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace shardify::media {

// `pixels`: height rows of width * channels samples, interleaved; uint8 for bit_depth 8,
// native-endian uint16 for bit_depth 16. channels: 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA.
Result<std::vector<uint8_t>> EncodePng(const void* pixels, uint32_t width, uint32_t height, int channels,
                                       int bit_depth);
// EncodePng, then an atomic write of `path`.
Status WritePngFile(const std::string& path, const void* pixels, uint32_t width, uint32_t height, int channels,
                    int bit_depth);

}  // namespace shardify::media
