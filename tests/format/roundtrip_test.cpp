#include <catch2/catch.hpp>
#include <cmath>

#include "base/file.h"
#include "fixtures.h"
#include "format/dataset.h"
#include "format/fields.h"
#include "format/writer.h"
#include "tests/common/temp_dir.h"

using namespace shardify;
using namespace shardify::testing;

namespace {

std::vector<uint8_t> DecodeAll(const SampleView& v, size_t field, Decoder& d) {
  auto b = v.blob(field);
  REQUIRE(b.ok());
  std::vector<uint8_t> out(b->raw_size);
  REQUIRE(v.Decode(field, out.data(), out.size(), d).ok());
  return out;
}

WriterOptions Quick(uint64_t shard_bytes = 256ull << 20) {
  WriterOptions o;
  o.fsync = false;
  o.target_shard_bytes = shard_bytes;
  return o;
}

}  // namespace

TEST_CASE("format: every dtype and ranks 0-4 round trip bit for bit") {
  const DType dtypes[] = {DType::kU8,  DType::kI8,  DType::kU16, DType::kI16, DType::kU32,
                          DType::kI32, DType::kF16, DType::kF32, DType::kF64, DType::kI64};
  const Shape shapes[] = {{}, {7}, {3, 5}, {2, 3, 4}, {2, 1, 3, 5}};
  TempDir tmp;
  for (DType t : dtypes) {
    for (const Shape& shape : shapes) {
      const std::string dir = tmp / (std::string(DTypeName(t)) + "-" + std::to_string(shape.size()));
      std::vector<FieldSpec> fields = {{"x", FieldKind::kNdarray, t, shape, {}, {}}};
      auto w = DatasetWriter::Create(dir, fields, Quick(300));
      REQUIRE(w.ok());
      std::vector<std::vector<uint8_t>> inputs;
      for (uint64_t i = 0; i < 5; ++i) {
        inputs.push_back(Pattern(*ByteSize(shape, t), i, i % 2 == 0));
        SampleInput s;
        s.values.push_back(FieldValue::Array(inputs.back(), shape));
        REQUIRE((*w)->Append(std::move(s)).ok());
      }
      REQUIRE((*w)->Finish().ok());
      auto ds = Dataset::Open(dir);
      REQUIRE(ds.ok());
      Decoder d;
      for (uint64_t i = 0; i < 5; ++i) {
        auto v = (*ds)->Sample(i);
        REQUIRE(v.ok());
        CHECK(*v->shape(0) == shape);
        CHECK(DecodeAll(*v, 0, d) == inputs[i]);
      }
    }
  }
}

TEST_CASE("format: variable shapes and scalars round trip") {
  TempDir tmp;
  std::vector<FieldSpec> fields = {{"img", FieldKind::kNdarray, DType::kU16, {-1, -1, 3}, {}, {}},
                                   {"label", FieldKind::kInt, DType::kU8, {}, {}, {}},
                                   {"weight", FieldKind::kFloat, DType::kU8, {}, {}, {}},
                                   {"name", FieldKind::kString, DType::kU8, {}, {}, {}},
                                   {"hdr", FieldKind::kBytes, DType::kU8, {}, {}, {}}};
  auto w = DatasetWriter::Create(tmp.path(), fields, Quick(2000));
  REQUIRE(w.ok());
  for (int64_t i = 0; i < 40; ++i) {
    const Shape shape = {1 + i % 5, 2 + i % 3, 3};
    SampleInput s;
    s.values = {FieldValue::Array(Pattern(*ByteSize(shape, DType::kU16), i), shape), FieldValue::Int(-i),
                FieldValue::Float(i * 0.25), FieldValue::String(i % 4 ? "n" + std::to_string(i) : ""),
                FieldValue::Bytes(std::vector<uint8_t>(i % 3, 0))};
    REQUIRE((*w)->Append(std::move(s)).ok());
  }
  REQUIRE((*w)->Finish().ok());
  auto ds = Dataset::Open(tmp.path());
  REQUIRE(ds.ok());
  REQUIRE((*ds)->manifest().shards.size() > 1);
  Decoder d;
  for (int64_t i = 0; i < 40; ++i) {
    auto v = (*ds)->Sample(static_cast<uint64_t>(i));
    REQUIRE(v.ok());
    const Shape shape = {1 + i % 5, 2 + i % 3, 3};
    CHECK(*v->shape(0) == shape);
    CHECK(DecodeAll(*v, 0, d) == Pattern(*ByteSize(shape, DType::kU16), i));
    CHECK(*v->int_value(1) == -i);
    CHECK(*v->float_value(2) == i * 0.25);
    CHECK(*v->bytes_value(3) == (i % 4 ? "n" + std::to_string(i) : ""));
    CHECK(v->bytes_value(4)->size() == static_cast<size_t>(i % 3));
    CHECK(v->int_value(0).status().code() == StatusCode::kInvalidArgument);
  }
}

TEST_CASE("format: zero and one sample datasets") {
  TempDir tmp;
  REQUIRE(WriteSmallDataset(tmp / "zero", 0).ok());
  auto zero = Dataset::Open(tmp / "zero");
  REQUIRE(zero.ok());
  CHECK((*zero)->num_samples() == 0);
  CHECK((*zero)->manifest().shards.empty());
  CHECK((*zero)->Sample(0).status().code() == StatusCode::kOutOfRange);

  REQUIRE(WriteSmallDataset(tmp / "one", 1).ok());
  auto one = Dataset::Open(tmp / "one");
  REQUIRE(one.ok());
  CHECK((*one)->num_samples() == 1);
  Decoder d;
  CHECK(DecodeAll(*(*one)->Sample(0), 0, d) == Pattern(64, 0));
}

TEST_CASE("format: many shards, splits, classes, stats and the mapping cap") {
  TempDir tmp;
  REQUIRE(WriteSmallDataset(tmp.path(), 400, 1024).ok());
  ReadOptions ro;
  ro.max_open_shards = 3;
  auto ds = Dataset::Open(tmp.path(), ro);
  REQUIRE(ds.ok());
  const Manifest& m = (*ds)->manifest();
  CHECK(m.shards.size() > 20);
  REQUIRE(m.splits.size() == 2);
  CHECK(m.splits[0].name == "train");
  CHECK(m.splits[0].num_samples == 300);
  CHECK(m.splits[1].first_sample == 300);
  CHECK(m.classes.size() == 10);
  Decoder d;
  double sum = 0, sumsq = 0, lo = 1e9, hi = -1e9;
  for (uint64_t i = 0; i < 400; ++i) {
    auto v = (*ds)->Sample(i);
    REQUIRE(v.ok());
    for (uint8_t b : DecodeAll(*v, 0, d)) {
      sum += b;
      sumsq += double(b) * b;
      lo = std::min<double>(lo, b);
      hi = std::max<double>(hi, b);
    }
    CHECK(*v->int_value(1) == static_cast<int64_t>(i % 10));
    CHECK((*ds)->open_shards() <= 3);
  }
  REQUIRE(m.stats.size() == 1);
  const double n = 400 * 64, mean = sum / n;
  CHECK(m.stats[0].count == 400 * 64);
  CHECK(m.stats[0].min == lo);
  CHECK(m.stats[0].max == hi);
  CHECK(m.stats[0].mean == Approx(mean));
  CHECK(m.stats[0].stddev == Approx(std::sqrt(sumsq / n - mean * mean)));
}

TEST_CASE("format: identical input gives byte-identical shards and manifest") {
  TempDir tmp;
  REQUIRE(WriteSmallDataset(tmp / "a", 200, 2048).ok());
  REQUIRE(WriteSmallDataset(tmp / "b", 200, 2048).ok());
  auto names = ListDir(tmp / "a");
  REQUIRE(names.ok());
  CHECK(*names == *ListDir(tmp / "b"));
  for (const auto& name : *names)
    CHECK(*ReadWholeFile(JoinPath(tmp / "a", name), 1 << 30) == *ReadWholeFile(JoinPath(tmp / "b", name), 1 << 30));
}

TEST_CASE("format: a trained dictionary is used and round trips") {
  TempDir tmp;
  auto w = DatasetWriter::Create(tmp.path(), ImageLabelFields({1, 28, 28}), Quick());
  REQUIRE(w.ok());
  std::vector<std::vector<uint8_t>> train;
  for (int i = 0; i < 200; ++i) train.push_back(Pattern(784, i));
  REQUIRE((*w)->TrainDictionary("image", train, 4096).ok());
  CHECK((*w)->TrainDictionary("label", train).code() == StatusCode::kInvalidArgument);
  for (int i = 0; i < 50; ++i) REQUIRE((*w)->Append(ImageLabelSample(i, "train", {1, 28, 28})).ok());
  REQUIRE((*w)->Finish().ok());
  auto ds = Dataset::Open(tmp.path());
  REQUIRE(ds.ok());
  CHECK_FALSE((*ds)->manifest().fields[0].dictionary.empty());
  Decoder d;
  for (int i = 0; i < 50; ++i) {
    auto v = (*ds)->Sample(i);
    CHECK(v->blob(0)->codec == Codec::kZstdDict);
    CHECK(DecodeAll(*v, 0, d) == Pattern(784, i));
  }
}

TEST_CASE("format: a dictionary for small pictures stores their literals raw, and they read the same") {
  TempDir tmp;
  WriterOptions o = Quick();
  o.level = 9;
  auto w = DatasetWriter::Create(tmp.path(), ImageLabelFields({1, 28, 28}), o);
  REQUIRE(w.ok());
  std::vector<std::vector<uint8_t>> train;
  for (int i = 0; i < 200; ++i) train.push_back(ImageLike(i));
  REQUIRE((*w)->TrainDictionary("image", train, 4096).ok());
  for (int i = 0; i < 20; ++i) {
    SampleInput s = ImageLabelSample(i, "train", {1, 28, 28});
    s.values[0] = FieldValue::Array(ImageLike(1000 + i), {1, 28, 28});
    REQUIRE((*w)->Append(std::move(s)).ok());
  }
  REQUIRE((*w)->Finish().ok());
  auto ds = Dataset::Open(tmp.path());
  REQUIRE(ds.ok());
  Decoder d;
  for (int i = 0; i < 20; ++i) {
    auto v = (*ds)->Sample(i);
    const BlobInfo b = *v->blob(0);
    REQUIRE(b.codec == Codec::kZstdDict);
    CHECK(ZstdLiteralsType(std::vector<uint8_t>(b.data, b.data + b.stored_size)) == 0);
    CHECK(DecodeAll(*v, 0, d) == ImageLike(1000 + i));
  }
  // The choice is recorded, for shardify info and provenance readers.
  CHECK(MetaValue((*ds)->manifest().provenance.options, kRawLiteralsKey) == "image");
}

TEST_CASE("format: incompressible blobs are stored raw") {
  TempDir tmp;
  auto w = DatasetWriter::Create(tmp.path(), {{"x", FieldKind::kNdarray, DType::kU8, {4096}, {}, {}}}, Quick());
  SampleInput s;
  s.values.push_back(FieldValue::Array(Pattern(4096, 1, /*smooth=*/false), {4096}));
  REQUIRE((*w)->Append(std::move(s)).ok());
  REQUIRE((*w)->Finish().ok());
  auto ds = Dataset::Open(tmp.path());
  REQUIRE(ds.ok());
  auto v = (*ds)->Sample(0);
  CHECK(v->blob(0)->codec == Codec::kRaw);
  CHECK(v->blob(0)->stored_size == 4096);
}
