#include "media/png.h"

#include <zlib.h>

#include <cstring>

#include "base/file.h"

namespace shardify::media {

namespace {

void PutBE32(std::vector<uint8_t>* out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out->push_back(static_cast<uint8_t>(v >> s));
}

void AppendChunk(std::vector<uint8_t>* out, const char type[4], const std::vector<uint8_t>& data) {
  PutBE32(out, static_cast<uint32_t>(data.size()));
  const size_t start = out->size();
  out->insert(out->end(), type, type + 4);
  out->insert(out->end(), data.begin(), data.end());
  const uLong crc = crc32(0L, out->data() + start, static_cast<uInt>(out->size() - start));
  PutBE32(out, static_cast<uint32_t>(crc));
}

}  // namespace

Result<std::vector<uint8_t>> EncodePng(const void* pixels, uint32_t width, uint32_t height, int channels,
                                       int bit_depth) {
  if (channels < 1 || channels > 4) return InvalidArgument("PNG: " + std::to_string(channels) + " channels (1..4)");
  if (bit_depth != 8 && bit_depth != 16) return InvalidArgument("PNG: bit depth " + std::to_string(bit_depth));
  if (width == 0 || height == 0 || width > (1u << 24) || height > (1u << 24))
    return InvalidArgument("PNG: size " + std::to_string(width) + "x" + std::to_string(height));
  const size_t row = static_cast<size_t>(width) * channels * (bit_depth / 8);
  std::vector<uint8_t> raw((row + 1) * height);
  const auto* src = static_cast<const uint8_t*>(pixels);
  for (uint32_t y = 0; y < height; ++y) {
    uint8_t* dst = raw.data() + y * (row + 1);
    dst[0] = 0;  // filter: none
    if (bit_depth == 8) {
      std::memcpy(dst + 1, src + y * row, row);
      continue;
    }
    for (size_t k = 0; k < row / 2; ++k) {  // PNG stores 16-bit samples big-endian
      uint16_t v;
      std::memcpy(&v, src + y * row + 2 * k, 2);
      dst[1 + 2 * k] = static_cast<uint8_t>(v >> 8);
      dst[2 + 2 * k] = static_cast<uint8_t>(v);
    }
  }
  uLongf zsize = compressBound(static_cast<uLong>(raw.size()));
  std::vector<uint8_t> z(zsize);
  if (compress2(z.data(), &zsize, raw.data(), static_cast<uLong>(raw.size()), 6) != Z_OK)
    return Internal("PNG: deflate failed");
  z.resize(zsize);
  static const uint8_t kColorType[] = {0, 0, 4, 2, 6};
  std::vector<uint8_t> ihdr;
  PutBE32(&ihdr, width);
  PutBE32(&ihdr, height);
  ihdr.insert(ihdr.end(), {static_cast<uint8_t>(bit_depth), kColorType[channels], 0, 0, 0});
  std::vector<uint8_t> out = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
  AppendChunk(&out, "IHDR", ihdr);
  AppendChunk(&out, "IDAT", z);
  AppendChunk(&out, "IEND", {});
  return out;
}

Status WritePngFile(const std::string& path, const void* pixels, uint32_t width, uint32_t height, int channels,
                    int bit_depth) {
  ASSIGN_OR_RETURN(const std::vector<uint8_t> png, EncodePng(pixels, width, height, channels, bit_depth));
  return WriteFileAtomic(path, png.data(), png.size(), /*fsync=*/false).WithContext("writing " + path);
}

}  // namespace shardify::media
