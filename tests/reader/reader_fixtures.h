// Datasets written by the reader tests with DatasetWriter.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "format/writer.h"
#include "tests/format/fixtures.h"

namespace shardify::testing {

inline uint64_t SplitMix(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Image bytes of sample `index`: the index in the first 8 bytes, then bytes that are
// smooth (compressible) or random (stored raw).
inline std::vector<uint8_t> SampleBytes(uint64_t index, size_t n, bool random) {
  std::vector<uint8_t> out(n);
  uint64_t x = index + 1;
  for (size_t i = 0; i < n; ++i) {
    out[i] = random ? static_cast<uint8_t>(SplitMix(x)) : static_cast<uint8_t>((index + i / 5) % 23);
  }
  std::memcpy(out.data(), &index, std::min<size_t>(8, n));
  return out;
}

struct FixtureOptions {
  uint64_t samples = 100;
  int64_t side = 8;          // image [1, side, side] u8
  bool random = false;       // incompressible image bytes
  bool variable = false;     // add field "var": u16 [-1, 3], index % 5 + 1 rows
  uint64_t val_samples = 0;  // the last ones go to split "val"
  uint64_t shard_bytes = 4096;
  int classes = 4;             // label = index % classes (skewed: see `skew`)
  bool skew = false;           // label 0 for 3 samples in 4
  Codec codec = Codec::kZstd;  // how the writer stores blobs
  // Images like photographs (ImageLike; side 28) with a trained dictionary at level 9, as
  // shardify stores small images: zstd frames whose literals are raw.
  bool pictures = false;
};

// Image bytes of sample `index` as the fixture writes them.
inline std::vector<uint8_t> FixtureImage(const FixtureOptions& o, uint64_t index) {
  const size_t n = static_cast<size_t>(o.side * o.side);
  if (!o.pictures) return SampleBytes(index, n, o.random);
  std::vector<uint8_t> out = ImageLike(index);
  std::memcpy(out.data(), &index, 8);
  return out;
}

inline FieldSpec Field(std::string name, FieldKind kind, DType dtype = DType::kU8, Shape shape = {}) {
  FieldSpec f;
  f.name = std::move(name);
  f.kind = kind;
  f.dtype = dtype;
  f.shape = std::move(shape);
  return f;
}

inline std::vector<FieldSpec> FixtureFields(const FixtureOptions& o) {
  std::vector<FieldSpec> f;
  f.push_back(Field("image", FieldKind::kNdarray, DType::kU8, {1, o.side, o.side}));
  f.push_back(Field("label", FieldKind::kInt));
  f.push_back(Field("score", FieldKind::kFloat));
  f.push_back(Field("path", FieldKind::kString));
  if (o.variable) f.push_back(Field("var", FieldKind::kNdarray, DType::kU16, {-1, 3}));
  return f;
}

inline int64_t FixtureLabel(const FixtureOptions& o, uint64_t i) {
  if (o.skew) return i % 4 != 0 ? 0 : static_cast<int64_t>(1 + (i / 4) % (o.classes - 1));
  return static_cast<int64_t>(i % static_cast<uint64_t>(o.classes));
}

inline SampleInput FixtureSample(const FixtureOptions& o, uint64_t i) {
  SampleInput s;
  s.split = i + o.val_samples < o.samples ? "train" : "val";
  s.values.push_back(FieldValue::Array(FixtureImage(o, i), {1, o.side, o.side}));
  s.values.push_back(FieldValue::Int(FixtureLabel(o, i)));
  s.values.push_back(FieldValue::Float(static_cast<double>(i) * 0.5));
  s.values.push_back(FieldValue::String("img/" + std::to_string(i) + ".png"));
  if (o.variable) {
    const int64_t rows = static_cast<int64_t>(i % 5 + 1);
    std::vector<uint8_t> v(static_cast<size_t>(rows) * 3 * 2);
    for (size_t k = 0; k < v.size() / 2; ++k) {
      const uint16_t value = static_cast<uint16_t>(i * 10 + k + 1);
      std::memcpy(&v[2 * k], &value, 2);
    }
    s.values.push_back(FieldValue::Array(std::move(v), {rows, 3}));
  }
  return s;
}

inline Status WriteFixture(const std::string& dir, const FixtureOptions& o) {
  WriterOptions w;
  w.target_shard_bytes = o.shard_bytes;
  w.fsync = false;
  w.level = o.pictures ? 9 : 1;
  w.codec = o.codec;
  w.compute_stats = false;
  for (int c = 0; c < o.classes; ++c) w.classes.push_back("c" + std::to_string(c));
  ASSIGN_OR_RETURN(auto writer, DatasetWriter::Create(dir, FixtureFields(o), w));
  if (o.pictures) {
    std::vector<std::vector<uint8_t>> train;
    for (uint64_t i = 0; i < 200; ++i) train.push_back(ImageLike(1000 + i));
    RETURN_IF_ERROR(writer->TrainDictionary("image", train, 4096));
  }
  for (uint64_t i = 0; i < o.samples; ++i) RETURN_IF_ERROR(writer->Append(FixtureSample(o, i)));
  return writer->Finish();
}

}  // namespace shardify::testing
