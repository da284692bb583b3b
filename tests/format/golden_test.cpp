// Datasets written by earlier versions of this library, kept in tests/data/: they must
// still read, and writing the same input today must give the same bytes (a change of
// bytes needs a format change in FORMAT.md, and new golden files).
#include <catch2/catch.hpp>
#include <cstring>

#include "base/file.h"
#include "format/dataset.h"
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

// The exact input the golden datasets were written from.
Status WriteGoldenInput(const std::string& dir, bool chunked, bool shuffled = false) {
  FieldSpec image{"image", FieldKind::kNdarray, DType::kU16, {1, -1, 6}, {}, {{"role", "image"}}};
  if (chunked) image.chunk_shape = {1, 4, 4};
  if (shuffled) image.filter = Filter::kByteShuffle;
  WriterOptions o;
  o.classes = {"zero", "one"};
  o.provenance = {"golden", "1", "generated", {}};
  o.target_shard_bytes = 200;
  o.fsync = false;
  ASSIGN_OR_RETURN(auto w, DatasetWriter::Create(dir,
                                                 {image,
                                                  {"label", FieldKind::kInt, DType::kU8, {}, {}, {}},
                                                  {"path", FieldKind::kString, DType::kU8, {}, {}, {}}},
                                                 o));
  for (int i = 0; i < 4; ++i) {
    SampleInput s;
    s.split = i < 3 ? "train" : "test";
    s.values = {FieldValue::Array(Pixels(i), {1, 5 + i, 6}), FieldValue::Int(i % 2),
                FieldValue::String("s" + std::to_string(i) + ".png")};
    RETURN_IF_ERROR(w->Append(std::move(s)));
  }
  return w->Finish();
}

void CheckGolden(const std::string& name, uint32_t version, bool chunked, bool shuffled = false) {
  const std::string dir = kData + "/" + name;
  auto ds = Dataset::Open(dir);
  REQUIRE(ds.ok());
  CHECK((*ds)->manifest().format_version == version);
  CHECK((*ds)->manifest().fields[0].filter == (shuffled ? Filter::kByteShuffle : Filter::kNone));
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
  }
  testing::TempDir tmp;
  REQUIRE(WriteGoldenInput(tmp.path(), chunked, shuffled).ok());
  const auto names = *ListDir(dir);
  CHECK(names == *ListDir(tmp.path()));
  for (const auto& n : names) {
    INFO(n);
    CHECK(*ReadWholeFile(JoinPath(dir, n), 1 << 20) == *ReadWholeFile(JoinPath(tmp.path(), n), 1 << 20));
  }
}

}  // namespace

TEST_CASE("format golden: version 1 files read, and are written the same today") { CheckGolden("golden-v1", 1, false); }
TEST_CASE("format golden: version 2 (chunked) files read, and are written the same today") {
  CheckGolden("golden-v2", 2, true);
}
TEST_CASE("format golden: version 3 (chunked, byte-shuffled) files read, and are written the same today") {
  CheckGolden("golden-v3", 3, true, true);
}
