// Datasets written by earlier versions of this library, kept in tests/data/: they must
// still read, and writing the same input today must give the same bytes (a change of
// bytes needs a format change in FORMAT.md, and new golden files), save for provenance
// options the writer has added since.
#include <catch2/catch.hpp>
#include <cstring>

#include "base/file.h"
#include "format/dataset.h"
#include "format/layout.h"
#include "format/manifest.h"
#include "format/writer.h"
#include "tests/common/temp_dir.h"

using namespace shardify;

namespace {

const std::string kData = SHARDIFY_TEST_DATA_DIR;

std::vector<uint8_t> Pixels(int i) {
  std::vector<uint8_t> px(2 * (5 + i) * 6);
  for (size_t k = 0; k < px.size() / 2; ++k) {
    const auto v = static_cast<uint16_t>(i * 1000 + k);
    px[2 * k] = v & 0xff;
    px[2 * k + 1] = static_cast<uint8_t>(v >> 8);
  }
  return px;
}

// Rows [class, z, y, x] of sample i's delta-coded table (version 4): sorted, as
// mask.fg_locations is.
std::vector<uint8_t> Table(int i) {
  std::vector<int32_t> rows;
  for (int r = 0; r < 3 + i; ++r) rows.insert(rows.end(), {1 + r / 3, r, 2 * r + i, 40 - r});
  std::vector<uint8_t> out(rows.size() * 4);
  std::memcpy(out.data(), rows.data(), out.size());
  return out;
}

// What distinguishes the golden datasets' inputs: v2 chunks the image, v3 also
// byte-shuffles it, v4 gives it a zstd dictionary and adds a delta-coded table.
struct GoldenKind {
  bool chunked = false, shuffled = false, v4 = false;
};

// The exact input the golden datasets were written from (each made by writing it into
// tests/data/golden-vN when that version was new).
Status WriteGoldenInput(const std::string& dir, GoldenKind kind) {
  FieldSpec image{"image", FieldKind::kNdarray, DType::kU16, {1, -1, 6}, {}, {{"role", "image"}}};
  if (kind.chunked) image.chunk_shape = {1, 4, 4};
  if (kind.shuffled) image.filter = Filter::kByteShuffle;
  std::vector<FieldSpec> fields = {
      image, {"label", FieldKind::kInt, DType::kU8, {}, {}, {}}, {"path", FieldKind::kString, DType::kU8, {}, {}, {}}};
  if (kind.v4) {
    fields.push_back({"table", FieldKind::kNdarray, DType::kI32, {-1, 4}, {}, {}});
    fields.back().filter = Filter::kDeltaColumns;
  }
  WriterOptions o;
  o.classes = {"zero", "one"};
  o.provenance = {"golden", "1", "generated", {}};
  o.target_shard_bytes = 200;
  o.fsync = false;
  ASSIGN_OR_RETURN(auto w, DatasetWriter::Create(dir, fields, o));
  if (kind.v4) {
    std::vector<std::vector<uint8_t>> train;
    for (int i = 0; i < 200; ++i) train.push_back(Pixels(i % 7));
    RETURN_IF_ERROR(w->TrainDictionary("image", train, 1024));
  }
  for (int i = 0; i < 4; ++i) {
    SampleInput s;
    s.split = i < 3 ? "train" : "test";
    s.values = {FieldValue::Array(Pixels(i), {1, 5 + i, 6}), FieldValue::Int(i % 2),
                FieldValue::String("s" + std::to_string(i) + ".png")};
    if (kind.v4) s.values.push_back(FieldValue::Array(Table(i), {3 + i, 4}));
    RETURN_IF_ERROR(w->Append(std::move(s)));
  }
  return w->Finish();
}

void CheckGolden(const std::string& name, uint32_t version, GoldenKind kind) {
  const std::string dir = kData + "/" + name;
  auto ds = Dataset::Open(dir);
  REQUIRE(ds.ok());
  CHECK((*ds)->manifest().format_version == version);
  CHECK((*ds)->manifest().fields[0].filter == (kind.shuffled ? Filter::kByteShuffle : Filter::kNone));
  CHECK((*ds)->manifest().fields[0].dictionary.empty() == !kind.v4);
  CHECK((*ds)->manifest().classes == std::vector<std::string>{"zero", "one"});
  REQUIRE((*ds)->num_samples() == 4);
  Decoder d;
  for (int i = 0; i < 4; ++i) {
    auto v = (*ds)->Sample(i);
    REQUIRE(v.ok());
    CHECK(*v->shape(0) == Shape{1, 5 + i, 6});
    std::vector<uint8_t> px(*v->raw_size(0));
    REQUIRE(v->Decode(0, px.data(), px.size(), d).ok());
    CHECK(px == Pixels(i));
    CHECK(*v->int_value(1) == i % 2);
    CHECK(*v->bytes_value(2) == "s" + std::to_string(i) + ".png");
    if (kind.v4) {
      std::vector<uint8_t> table(*v->raw_size(3));
      REQUIRE(v->Decode(3, table.data(), table.size(), d).ok());
      CHECK(table == Table(i));
      CHECK(v->blob(0)->codec == Codec::kZstdDict);
    }
  }
  testing::TempDir tmp;
  REQUIRE(WriteGoldenInput(tmp.path(), kind).ok());
  const auto names = *ListDir(dir);
  CHECK(names == *ListDir(tmp.path()));
  for (const auto& n : names) {
    INFO(n);
    const std::vector<uint8_t> golden = *ReadWholeFile(JoinPath(dir, n), 1 << 20);
    const std::vector<uint8_t> today = *ReadWholeFile(JoinPath(tmp.path(), n), 1 << 20);
    if (n != kManifestFileName || !kind.v4) {
      CHECK(golden == today);
      continue;
    }
    // The manifest says today which fields got raw literals (a provenance option, no format
    // change): with that option set aside it is the golden one, and the shards are the same.
    Manifest m = *DecodeManifestFile(today.data(), today.size(), n);
    std::vector<KeyValue>& options = m.provenance.options;
    REQUIRE(options.size() == 1);
    CHECK(options[0] == KeyValue{kRawLiteralsKey, "image"});
    options.clear();
    CHECK(EncodeManifestFile(m) == golden);
  }
}

}  // namespace

TEST_CASE("format golden: version 1 files read, and are written the same today") {
  CheckGolden("golden-v1", 1, GoldenKind{});
}
TEST_CASE("format golden: version 2 (chunked) files read, and are written the same today") {
  CheckGolden("golden-v2", 2, GoldenKind{true, false, false});
}
TEST_CASE("format golden: version 3 (chunked, byte-shuffled) files read, and are written the same today") {
  CheckGolden("golden-v3", 3, GoldenKind{true, true, false});
}
TEST_CASE("format golden: version 4 (a zstd dictionary, a delta-coded table) files read, and are written the same") {
  CheckGolden("golden-v4", 4, GoldenKind{false, false, true});
}
