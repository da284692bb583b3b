#include "media/nifti.h"

#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <limits>
#include <string>

using namespace shardify;
using namespace shardify::media;

namespace {

// The first `n` bytes of a gzip-compressed file, or empty when it cannot be read.
std::vector<uint8_t> GunzipHead(const std::string& path, size_t n) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return {};
  std::vector<uint8_t> out(n);
  const int got = gzread(f, out.data(), static_cast<unsigned>(n));
  gzclose(f);
  out.resize(got > 0 ? static_cast<size_t>(got) : 0);
  return out;
}

// A brain MRI from Debian's insighttoolkit5-examples: i16 128 x 128 x 62, qform and sform set.
const char kBrain[] = "/usr/share/doc/insighttoolkit5-examples/examples/Data/KmeansTest_T1UCharRaw.nii.gz";

// A header with a distinct, float-exact value in every field.
NiftiHeader Sample(int version, bool big_endian) {
  NiftiHeader h;
  h.version = version;
  h.big_endian = big_endian;
  h.dim = {4, 7, 6, 5, 3, 1, 1, 1};
  h.datatype = 512;
  h.bitpix = 16;
  h.pixdim = {-1, 0.5, 0.75, 2.5, 1.25, 0, 0, 0};
  h.vox_offset = version == 1 ? 352 : 544;
  h.scl_slope = 2;
  h.scl_inter = -1024;
  h.cal_max = 4000;
  h.cal_min = -100;
  h.qform_code = 1;
  h.sform_code = 2;
  h.quatern = {0.25, -0.5, 0.125};
  h.qoffset = {-90, 126, -72};
  h.srow = {{{-0.5, 0, 0, 90}, {0, 0.75, 0, -126}, {0, 0, 2.5, -72}}};
  h.xyzt_units = 10;
  return h;
}

}  // namespace

TEST_CASE("media: a NIfTI header built from its fields parses back equal (both versions, both byte orders)") {
  for (int version : {1, 2}) {
    for (bool big : {false, true}) {
      INFO("NIfTI-" << version << (big ? " big-endian" : " little-endian"));
      const NiftiHeader h = Sample(version, big);
      const std::vector<uint8_t> bytes = BuildNiftiHeader(h);
      REQUIRE(bytes.size() == (version == 1 ? kNifti1HeaderSize : kNifti2HeaderSize));
      auto back = ParseNiftiHeader(bytes.data(), bytes.size());
      REQUIRE(back.ok());
      CHECK(*back == h);
      CHECK(BuildNiftiHeader(*back) == bytes);
      CHECK(ParseStoredNiftiHeader(bytes.data(), bytes.size()).ok());
    }
  }
  NiftiHeader pair = Sample(1, false);
  pair.single_file = false;
  const std::vector<uint8_t> b = BuildNiftiHeader(pair);
  CHECK(std::string(b.begin() + 344, b.begin() + 348) == std::string("ni1", 4));
  CHECK_FALSE(ParseNiftiHeader(b.data(), b.size())->single_file);
}

TEST_CASE("media: a real NIfTI-1 header parses as written and builds back byte for byte") {
  const std::vector<uint8_t> bytes = GunzipHead(kBrain, kNifti1HeaderSize);
  REQUIRE(bytes.size() == kNifti1HeaderSize);
  auto h = ParseStoredNiftiHeader(bytes.data(), bytes.size());
  INFO(h.status().ToString());
  REQUIRE(h.ok());
  CHECK(h->version == 1);
  CHECK_FALSE(h->big_endian);
  CHECK(h->single_file);
  CHECK(h->dim == std::array<int64_t, 8>{3, 128, 128, 62, 0, 0, 0, 0});
  CHECK(DTypeOfNifti(h->datatype) == DType::kI16);
  CHECK(h->bitpix == 16);
  CHECK(h->pixdim[1] == 2.0);
  CHECK(h->pixdim[3] == 3.0);
  CHECK(VoxOffsetBytes(*h) == 352);
  CHECK(h->scl_slope == 1.0);
  CHECK(h->qform_code == 2);
  CHECK(h->sform_code == 1);
  CHECK(h->qoffset[1] == -254.0);
  CHECK(h->srow[0][0] == -2.0);
  CHECK(h->xyzt_units == 2);
  CHECK(*NiftiVoxelBytes(*h) == 128ull * 128 * 62 * 2);
  CHECK(BuildNiftiHeader(*h, bytes) == bytes);
  // Every field goes through the struct: built on zeros, it parses back the same.
  const std::vector<uint8_t> fresh = BuildNiftiHeader(*h);
  CHECK(*ParseNiftiHeader(fresh.data(), fresh.size()) == *h);
  // The qform (a rotation of 180 degrees about y = z in RAS), in ITK's LPS.
  const NiftiGeometry g = GeometryOf(*h);
  CHECK(g.spacing == std::vector<double>{2, 2, 3});
  REQUIRE(g.origin.size() == 3);
  CHECK(g.origin[0] == Approx(0).margin(1e-9));
  CHECK(g.origin[1] == Approx(254));
  CHECK(g.origin[2] == Approx(0).margin(1e-9));
  const std::vector<double> want = {1, 0, 0, 0, 0, -1, 0, 1, 0};
  REQUIRE(g.direction.size() == 9);
  for (size_t k = 0; k < 9; ++k) CHECK(g.direction[k] == Approx(want[k]).margin(1e-6));
}

TEST_CASE("media: building over a header keeps every byte the struct does not hold, NaN payloads too") {
  std::vector<uint8_t> bytes = GunzipHead(kBrain, kNifti1HeaderSize);
  REQUIRE(bytes.size() == kNifti1HeaderSize);
  std::memcpy(bytes.data() + 148, "a description", 13);  // descrip
  const uint8_t signaling_nan[4] = {0x01, 0x00, 0x80, 0x7F};
  std::memcpy(bytes.data() + 124, signaling_nan, 4);  // cal_max
  auto h = ParseNiftiHeader(bytes.data(), bytes.size());
  REQUIRE(h.ok());
  CHECK(BuildNiftiHeader(*h, bytes) == bytes);
  // Retyped, only datatype, bitpix, scl_* and cal_* change.
  auto u8 = RetypeNiftiHeader(bytes, DType::kU8);
  REQUIRE(u8.ok());
  auto r = ParseNiftiHeader(u8->data(), u8->size());
  REQUIRE(r.ok());
  CHECK(r->datatype == 2);
  CHECK(r->bitpix == 8);
  CHECK(r->scl_slope == 0);
  CHECK(r->cal_max == 0);
  for (size_t k = 0; k < kNifti1HeaderSize; ++k) {
    const bool owned = (k >= 70 && k < 74) || (k >= 112 && k < 120) || (k >= 124 && k < 132);
    if (!owned && (*u8)[k] != bytes[k]) FAIL("byte " << k << " changed");
  }
  CHECK(*RetypeNiftiHeader(bytes, DType::kI16) == bytes);  // same dtype: untouched
  CHECK(RetypeNiftiHeader(bytes, DType::kF16).status().code() == StatusCode::kUnsupported);
}

TEST_CASE("media: MakeNifti1Header puts ITK geometry in the sform, and it reads back") {
  const std::vector<double> spacing = {0.5, 0.75, 2}, origin = {-10, 20, 5}, direction = {0, 1, 0, -1, 0, 0, 0, 0, 1};
  auto bytes = MakeNifti1Header({2, 3, 4, 5}, DType::kF32, spacing, origin, direction);
  REQUIRE(bytes.ok());
  auto h = ParseStoredNiftiHeader(bytes->data(), bytes->size());
  REQUIRE(h.ok());
  CHECK(h->dim == std::array<int64_t, 8>{4, 5, 4, 3, 2, 0, 0, 0});  // x, y, z, then channels
  CHECK(h->datatype == 16);
  CHECK(h->qform_code == 0);
  CHECK(h->sform_code == 1);
  const NiftiGeometry g = GeometryOf(*h);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(g.spacing[i] == Approx(spacing[i]));
    CHECK(g.origin[i] == Approx(origin[i]));
  }
  for (size_t k = 0; k < 9; ++k) CHECK(g.direction[k] == Approx(direction[k]).margin(1e-7));
  CHECK(*NiftiHeaderFits(*bytes, {2, 3, 4, 5}));
  CHECK_FALSE(*NiftiHeaderFits(*bytes, {1, 3, 4, 5}));
  CHECK(MakeNifti1Header({40000, 2}, DType::kU8, {}, {}, {}).status().code() == StatusCode::kInvalidArgument);
  CHECK(MakeNifti1Header({2}, DType::kU8, {}, {}, {}).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("media: truncated, foreign and impossible NIfTI headers are Corruption naming the field") {
  std::vector<uint8_t> good = BuildNiftiHeader(Sample(1, false));
  auto fails = [](const std::vector<uint8_t>& b, const std::string& what, size_t size = 0) {
    auto r = ParseStoredNiftiHeader(b.data(), size > 0 ? size : b.size());
    INFO(r.status().ToString());
    CHECK(r.status().code() == StatusCode::kCorruption);
    CHECK_THAT(r.status().message(), Catch::Contains(what));
  };
  CHECK_THAT(ParseNiftiHeader(good.data(), 100).status().message(), Catch::Contains("truncated NIfTI header (100"));
  std::vector<uint8_t> b = good;
  b[0] = 123;
  fails(b, "sizeof_hdr is neither 348 nor 540");
  std::vector<uint8_t> two = BuildNiftiHeader(Sample(2, false));
  CHECK_THAT(ParseNiftiHeader(two.data(), 400).status().message(), Catch::Contains("truncated NIfTI-2"));
  std::vector<uint8_t> padded(540, 0);
  std::memcpy(padded.data(), good.data(), 348);  // a NIfTI-1 header in 540 bytes
  fails(padded, "sizeof_hdr does not match its 540 bytes");
  b = good;
  b[40] = 0;  // dim[0]
  fails(b, "dim[0] is 0");
  b = good;
  b[44] = 0xFF, b[45] = 0xFF;  // dim[2] = -1
  fails(b, "dim[2] is -1");
  b = good;
  b[72] = 12;  // bitpix
  fails(b, "bitpix = 12");
  NiftiHeader h = Sample(1, false);
  h.vox_offset = 100;
  fails(BuildNiftiHeader(h), "vox_offset 100");
  h.vox_offset = std::numeric_limits<double>::quiet_NaN();
  CHECK(VoxOffsetBytes(h) == -1);
  fails(BuildNiftiHeader(h), "vox_offset -1");
  fails(good, "expected 348 or 540", 347);
}

TEST_CASE("media: NIfTI datatypes map to dtypes and back") {
  for (DType t : {DType::kU8, DType::kI8, DType::kU16, DType::kI16, DType::kU32, DType::kI32, DType::kI64, DType::kF32,
                  DType::kF64}) {
    INFO(DTypeName(t));
    CHECK(NiftiDatatypeOf(t) > 0);
    CHECK(DTypeOfNifti(NiftiDatatypeOf(t)) == t);
  }
  CHECK(NiftiDatatypeOf(DType::kF16) == 0);
  CHECK_FALSE(DTypeOfNifti(32).has_value());    // complex64
  CHECK_FALSE(DTypeOfNifti(1280).has_value());  // uint64
}

TEST_CASE("media: SwapElementBytes reverses each element, leaves bytes and a partial tail alone") {
  std::vector<uint8_t> v = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  SwapElementBytes(v.data(), v.size(), 4);
  CHECK(v == std::vector<uint8_t>{4, 3, 2, 1, 8, 7, 6, 5, 9});
  SwapElementBytes(v.data(), v.size(), 4);
  CHECK(v == std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8, 9});
  SwapElementBytes(v.data(), v.size(), 1);
  CHECK(v == std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8, 9});
  SwapElementBytes(v.data(), 8, 2);
  CHECK(v == std::vector<uint8_t>{2, 1, 4, 3, 6, 5, 8, 7, 9});
}
