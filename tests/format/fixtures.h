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
