// Field filters (format version 3): byte shuffle of blobs and chunks.
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

// A smooth float volume with noise in the low bits, like a resampled CT.
std::vector<uint8_t> FloatVolume(int64_t d, int64_t h, int64_t w, uint64_t seed) {
  std::vector<uint8_t> out(static_cast<size_t>(d * h * w) * 4);
  uint64_t x = seed;
  size_t n = 0;
  for (int64_t z = 0; z < d; ++z)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t c = 0; c < w; ++c, ++n) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        const float v = 1000.0f + 3.0f * static_cast<float>(z + y) + static_cast<float>(x >> 59) * 0.37f;
        std::memcpy(&out[n * 4], &v, 4);
      }
  return out;
}

struct Written {
  uint64_t stored = 0;  // bytes of the image blobs or chunks
  uint32_t version = 0;
};

// Writes three volumes with the given filter (chunked or not), reads every one back
// (whole and a region) and compares with the input. Returns what was stored.
Written RoundTrip(const std::string& dir, Filter filter, bool chunked) {
  FieldSpec image{"image", FieldKind::kNdarray, DType::kF32, {-1, 12, 10}, {}, {}};
  if (chunked) image.chunk_shape = {4, 5, 5};
  image.filter = filter;
  WriterOptions o;
  o.fsync = false;
  auto w = DatasetWriter::Create(dir, {image}, o);
  REQUIRE(w.ok());
  std::vector<std::vector<uint8_t>> inputs;
  for (int i = 0; i < 3; ++i) {
    inputs.push_back(FloatVolume(7 + i, 12, 10, 1 + i));
    SampleInput s;
    s.values = {FieldValue::Array(inputs.back(), {7 + i, 12, 10})};
    REQUIRE((*w)->Append(std::move(s)).ok());
  }
  REQUIRE((*w)->Finish().ok());
  auto ds = Dataset::Open(dir);
  REQUIRE(ds.ok());
  Written out;
  out.version = (*ds)->manifest().format_version;
  CHECK((*ds)->manifest().fields[0].filter == filter);
  Decoder d;
  for (int i = 0; i < 3; ++i) {
    auto v = (*ds)->Sample(i);
    REQUIRE(v.ok());
    std::vector<uint8_t> got(inputs[i].size());
    REQUIRE(v->Decode(0, got.data(), got.size(), d).ok());
    CHECK(got == inputs[i]);
    // A region across chunk borders: row 1..6 of depth 2, columns 3..8.
    std::vector<uint8_t> region(static_cast<size_t>(1 * 6 * 6) * 4);
    REQUIRE(v->DecodeRegion(0, {2, 1, 3}, {1, 6, 6}, region.data(), region.size(), d).ok());
    for (int64_t y = 0; y < 6; ++y) {
      CHECK(std::memcmp(&region[static_cast<size_t>(y * 6) * 4],
                        &inputs[i][static_cast<size_t>((2 * 12 + 1 + y) * 10 + 3) * 4], 24) == 0);
    }
    if (chunked) {
      for (uint64_t k = 0; k < *v->num_chunks(0); ++k) out.stored += v->chunk(0, k)->stored_size;
    } else {
      out.stored += v->blob(0)->stored_size;
    }
  }
  return out;
}

}  // namespace

TEST_CASE("format filter: byte shuffle groups byte k of every element, and unshuffle inverts it") {
  const uint8_t raw[] = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06};  // three u16: 0x0201 0x0403 0x0605
  uint8_t shuffled[6], back[6];
  detail::ByteShuffle(raw, shuffled, 3, 2);
  CHECK(std::vector<uint8_t>(shuffled, shuffled + 6) == std::vector<uint8_t>{0x01, 0x03, 0x05, 0x02, 0x04, 0x06});
  detail::ByteUnshuffle(shuffled, back, 3, 2);
  CHECK(std::memcmp(back, raw, 6) == 0);
  for (size_t elem : {1, 2, 3, 4, 8}) {  // the unrolled sizes and the generic loop
    std::vector<uint8_t> src(elem * 13), mid(src.size()), dst(src.size());
    std::iota(src.begin(), src.end(), uint8_t{7});
    detail::ByteShuffle(src.data(), mid.data(), 13, elem);
    for (size_t i = 0; i < 13; ++i)
      for (size_t k = 0; k < elem; ++k) CHECK(mid[k * 13 + i] == src[i * elem + k]);
    detail::ByteUnshuffle(mid.data(), dst.data(), 13, elem);
    CHECK(dst == src);
  }
}

TEST_CASE("format filter: shuffled fields read back exactly, chunked or not, and store smaller") {
  testing::TempDir tmp;
  const Written plain = RoundTrip(tmp / "plain", Filter::kNone, true);
  const Written shuffled = RoundTrip(tmp / "shuffled", Filter::kByteShuffle, true);
  const Written whole = RoundTrip(tmp / "whole", Filter::kByteShuffle, false);
  CHECK(plain.version == kFormatVersionChunks);
  CHECK(shuffled.version == kFormatVersionFilters);
  CHECK(whole.version == kFormatVersionFilters);
  CHECK(shuffled.stored < plain.stored);
}

TEST_CASE("format filter: the manifest refuses unknown filters, filters before version 3 and on scalars") {
  Manifest m;
  m.format_version = kFormatVersion;
  m.fields = {{"image", FieldKind::kNdarray, DType::kU16, {4}, {}, {}}};
  m.fields[0].filter = Filter::kByteShuffle;
  CHECK(ValidateManifest(m).ok());
  m.fields[0].filter = static_cast<Filter>(7);
  CHECK(ValidateManifest(m).code() == StatusCode::kInvalidArgument);
  CHECK_THAT(ValidateManifest(m).message(), Catch::Contains("unknown filter 7"));
  m.fields[0].filter = Filter::kByteShuffle;
  m.format_version = kFormatVersionChunks;
  CHECK_THAT(ValidateManifest(m).message(), Catch::Contains("needs format version 3"));
  m.format_version = kFormatVersion;
  m.fields = {{"label", FieldKind::kInt, DType::kU8, {}, {}, {}}};
  m.fields[0].filter = Filter::kByteShuffle;
  CHECK(ValidateManifest(m).code() == StatusCode::kInvalidArgument);
  // The filter survives the manifest file's encode/decode.
  m.fields = {{"image", FieldKind::kNdarray, DType::kF32, {4}, {}, {}}};
  m.fields[0].filter = Filter::kByteShuffle;
  const std::vector<uint8_t> bytes = EncodeManifestFile(m);
  auto back = DecodeManifestFile(bytes.data(), bytes.size(), "m");
  REQUIRE(back.ok());
  CHECK(back->fields[0].filter == Filter::kByteShuffle);
}
