// Delta columns (format version 4): sorted integer tables stored as column differences.
#include <catch2/catch.hpp>
#include <cstring>
#include <numeric>

#include "format/codec_internal.h"
#include "format/dataset.h"
#include "format/layout.h"
#include "format/manifest.h"
#include "format/writer.h"
#include "tests/common/temp_dir.h"

using namespace shardify;

namespace {

// Rows [class, z, y, x] of i32, sorted as mask.fg_locations is: by class, then position.
std::vector<uint8_t> Locations(int64_t rows, uint64_t seed) {
  std::vector<int32_t> v;
  uint64_t x = seed;
  int64_t pos = 0;
  for (int64_t r = 0; r < rows; ++r) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    pos += 1 + static_cast<int64_t>(x >> 60);
    const int32_t cls = static_cast<int32_t>(1 + r * 3 / rows);
    const int64_t p = pos % (60 * 128 * 128);
    v.insert(v.end(), {cls, static_cast<int32_t>(p / (128 * 128)), static_cast<int32_t>(p / 128 % 128),
                       static_cast<int32_t>(p % 128)});
  }
  std::vector<uint8_t> b(v.size() * 4);
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

}  // namespace

TEST_CASE("format filter: delta columns store column differences byte by byte, and invert exactly") {
  // Two rows of two u16 columns: [[0x0102, 0x0010], [0x0105, 0x0008]].
  const uint16_t raw[] = {0x0102, 0x0010, 0x0105, 0x0008};
  uint8_t stored[8], back[8];
  detail::DeltaColumns(reinterpret_cast<const uint8_t*>(raw), stored, 2, 2, 2);
  // Column 0: 0x0102 then +3; column 1: 0x0010 then -8 (0xfff8); low bytes first per column.
  CHECK(std::vector<uint8_t>(stored, stored + 8) ==
        std::vector<uint8_t>{0x02, 0x03, 0x01, 0x00, 0x10, 0xf8, 0x00, 0xff});
  detail::UndoDeltaColumns(stored, back, 2, 2, 2);
  CHECK(std::memcmp(back, raw, 8) == 0);
  for (size_t elem : {1, 2, 4, 8}) {
    std::vector<uint8_t> src(elem * 5 * 7), mid(src.size()), dst(src.size());
    uint64_t x = 3;
    for (auto& b : src) b = static_cast<uint8_t>((x = x * 6364136223846793005ull + 1) >> 56);
    detail::DeltaColumns(src.data(), mid.data(), 7, 5, elem);
    detail::UndoDeltaColumns(mid.data(), dst.data(), 7, 5, elem);
    CHECK(dst == src);
  }
}

TEST_CASE("format filter: a delta-coded table reads back exactly, stores smaller, and needs version 4") {
  testing::TempDir tmp;
  uint64_t stored[2] = {0, 0};
  for (int coded = 0; coded < 2; ++coded) {
    FieldSpec table{"mask.fg_locations", FieldKind::kNdarray, DType::kI32, {-1, 4}, {}, {}};
    if (coded) table.filter = Filter::kDeltaColumns;
    WriterOptions o;
    o.fsync = false;
    const std::string dir = tmp / (coded ? "coded" : "plain");
    auto w = DatasetWriter::Create(dir, {table}, o);
    REQUIRE(w.ok());
    for (int i = 0; i < 3; ++i) {
      SampleInput s;
      const int64_t rows = i == 2 ? 0 : 3000 + i;  // a case without foreground: no rows
      s.values = {FieldValue::Array(Locations(rows, 7 + i), {rows, 4})};
      REQUIRE((*w)->Append(std::move(s)).ok());
    }
    REQUIRE((*w)->Finish().ok());
    auto ds = Dataset::Open(dir);
    REQUIRE(ds.ok());
    CHECK((*ds)->manifest().format_version == (coded ? kFormatVersionDeltaColumns : 1u));
    Decoder d;
    for (int i = 0; i < 3; ++i) {
      auto v = (*ds)->Sample(i);
      REQUIRE(v.ok());
      const int64_t rows = i == 2 ? 0 : 3000 + i;
      std::vector<uint8_t> got(*v->raw_size(0));
      REQUIRE(v->Decode(0, got.data(), got.size(), d).ok());
      CHECK(got == Locations(rows, 7 + i));
      stored[coded] += v->blob(0)->stored_size;
    }
  }
  CHECK(stored[1] < stored[0] * 3 / 4);
  // Only on tables, from version 4.
  Manifest m;
  m.format_version = kFormatVersion;
  m.fields = {{"t", FieldKind::kNdarray, DType::kI32, {-1, 4}, {}, {}}};
  m.fields[0].filter = Filter::kDeltaColumns;
  CHECK(ValidateManifest(m).ok());
  m.format_version = kFormatVersionFilters;
  CHECK_THAT(ValidateManifest(m).message(), Catch::Contains("need format version 4"));
  m.format_version = kFormatVersion;
  for (const Shape& bad : {Shape{-1, -1}, Shape{10}, Shape{2, 3, 4}}) {
    m.fields[0].shape = bad;
    CHECK_THAT(ValidateManifest(m).message(), Catch::Contains("delta columns need a table"));
  }
  m.fields[0].shape = {-1, 4};
  m.fields[0].chunk_shape = {8, 4};
  CHECK(ValidateManifest(m).code() == StatusCode::kInvalidArgument);
  CHECK(std::string(FilterName(Filter::kDeltaColumns)) == "delta_columns");
}
