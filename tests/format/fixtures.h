// Small datasets written by the tests themselves.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "format/writer.h"

namespace shardify::testing {

// Deterministic pseudo-random bytes (splitmix64), compressible when `smooth`.
inline std::vector<uint8_t> Pattern(size_t n, uint64_t seed, bool smooth = true) {
  std::vector<uint8_t> out(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    x += 0x9E3779B97F4A7C15ull;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    out[i] = smooth ? static_cast<uint8_t>((i / 7 + seed) % 16 + (z & 1)) : static_cast<uint8_t>(z);
  }
  return out;
}

// A 28x28 u8 picture like a photographed object: zeros around an ellipse of varied
// values (0..127), so a zstd frame of it holds many literals that Huffman coding shrinks
// only a little. Another seed moves and sizes the ellipse.
inline std::vector<uint8_t> ImageLike(uint64_t seed) {
  std::vector<uint8_t> out(784, 0);
  const std::vector<uint8_t> noise = Pattern(out.size(), seed, /*smooth=*/false);
  const double cy = 13 + static_cast<double>(seed % 3), cx = 13 + static_cast<double>(seed % 5) / 2;
  const double ry = 9 + static_cast<double>(seed % 4), rx = 6 + static_cast<double>(seed % 3);
  for (int y = 0; y < 28; ++y)
    for (int x = 0; x < 28; ++x) {
      const double dy = (y - cy) / ry, dx = (x - cx) / rx;
      if (dy * dy + dx * dx < 1) out[static_cast<size_t>(y * 28 + x)] = noise[static_cast<size_t>(y * 28 + x)] & 0x7f;
    }
  return out;
}

// Literals_Block_Type of the first block of a zstd frame (RFC 8878, 3.1.1.3.1): 0 raw,
// 1 RLE, 2 Huffman-coded, 3 Huffman with the previous table; -1 when the first block is
// not a compressed one.
inline int ZstdLiteralsType(const std::vector<uint8_t>& frame) {
  if (frame.size() < 6) return -1;
  const uint8_t header = frame[4];
  const bool single_segment = (header >> 5) & 1;
  static constexpr size_t kDictIdBytes[] = {0, 1, 2, 4};
  const size_t content_size_bytes[] = {single_segment ? 1u : 0u, 2, 4, 8};
  const size_t at = 5 + (single_segment ? 0 : 1) + kDictIdBytes[header & 3] + content_size_bytes[header >> 6];
  if (at + 4 > frame.size()) return -1;
  const uint32_t block = frame[at] | frame[at + 1] << 8 | frame[at + 2] << 16;
  if (((block >> 1) & 3) != 2) return -1;
  return frame[at + 3] & 3;
}

inline std::vector<FieldSpec> ImageLabelFields(Shape shape = {1, 8, 8}) {
  FieldSpec image{"image", FieldKind::kNdarray, DType::kU8, std::move(shape), {}, {{"role", "image"}}};
  FieldSpec label{"label", FieldKind::kInt, DType::kU8, {}, {}, {}};
  FieldSpec path{"path", FieldKind::kString, DType::kU8, {}, {}, {}};
  return {image, label, path};
}

inline SampleInput ImageLabelSample(uint64_t i, const std::string& split = "train", Shape shape = {1, 8, 8}) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  SampleInput s;
  s.split = split;
  s.values.push_back(FieldValue::Array(Pattern(n, i), std::move(shape)));
  s.values.push_back(FieldValue::Int(static_cast<int64_t>(i % 10)));
  s.values.push_back(FieldValue::String("img/" + std::to_string(i) + ".png"));
  return s;
}

// Writes `n` samples of `shape` (8x8 by default) split train/val at n*3/4, `shard_bytes`
// per shard.
inline Status WriteSmallDataset(const std::string& dir, uint64_t n, uint64_t shard_bytes = 4096,
                                WriterOptions options = {}, const Shape& shape = {1, 8, 8}) {
  options.target_shard_bytes = shard_bytes;
  options.fsync = false;
  options.classes = {"c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9"};
  ASSIGN_OR_RETURN(auto w, DatasetWriter::Create(dir, ImageLabelFields(shape), options));
  for (uint64_t i = 0; i < n; ++i)
    RETURN_IF_ERROR(w->Append(ImageLabelSample(i, i < n * 3 / 4 ? "train" : "val", shape)));
  return w->Finish();
}

}  // namespace shardify::testing
