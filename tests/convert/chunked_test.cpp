// --patch-size: chunked image and mask fields, mask.fg_locations, determinism, bad values.
#include <sys/wait.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "convert/sources/schema_internal.h"
#include "format/chunking.h"
#include "reader/patch_sampler.h"
#include "tests/convert/convert_fixtures.h"

using namespace shardify;
using namespace shardify::convert;
using namespace shardify::convert::testing;
namespace fs = std::filesystem;

namespace {

constexpr uint64_t kCap = 10;

struct Case {
  std::string name;
  Shape shape;                // [1, d, h, w] of one channel
  std::vector<uint8_t> mask;  // u8 labels; empty: no label file
};

// Labels: class 1 is a slab (more voxels than the cap), class 2 every 37th voxel, class 3
// exactly three voxels; `empty` gives an all-background mask.
std::vector<uint8_t> MakeMask(int d, int h, int w, bool empty) {
  std::vector<uint8_t> m(static_cast<size_t>(d * h * w), 0);
  if (empty) return m;
  for (int z = 0; z < d; ++z)
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        const size_t v = static_cast<size_t>((z * h + y) * w + x);
        if (z < 2 && y < 3)
          m[v] = 1;
        else if (v % 37 == 5)
          m[v] = 2;
      }
  for (size_t v : {m.size() - 1, m.size() / 2 + 1, size_t{40}}) m[v] = 3;
  return m;
}

// An nnU-Net source: two training cases of different sizes (one without foreground) and
// one test case without labels; images have two i16 channels.
std::vector<Case> MakeNnunet(const std::string& src) {
  WriteText(src + "/dataset.json", R"({"channel_names": {"0": "T1", "1": "T2"},
    "labels": {"background": 0, "a": 1, "b": 2, "c": 3}, "numTraining": 2, "file_ending": ".nii.gz"})");
  std::vector<Case> cases = {{"case_001", {1, 9, 10, 12}, MakeMask(9, 10, 12, false)},
                             {"case_002", {1, 6, 11, 8}, MakeMask(6, 11, 8, true)},
                             {"case_009", {1, 5, 6, 7}, {}}};
  uint32_t seed = 1;
  for (const Case& c : cases) {
    const std::string dir = src + (c.mask.empty() ? "/imagesTs/" : "/imagesTr/");
    const int d = static_cast<int>(c.shape[1]), h = static_cast<int>(c.shape[2]), w = static_cast<int>(c.shape[3]);
    WriteVolume(dir + c.name + "_0000.nii.gz", DType::kI16, d, h, w, seed++);
    WriteVolume(dir + c.name + "_0001.nii.gz", DType::kI16, d, h, w, seed++);
    if (!c.mask.empty()) {
      MakeDirs(src + "/labelsTr");
      Status s = WriteNifti(src + "/labelsTr/" + c.name + ".nii.gz", DType::kU8, c.shape, c.mask, TestGeometry());
      REQUIRE(s.ok());
    }
  }
  return cases;
}

std::vector<uint8_t> DecodeAll(const SampleView& v, int field, Decoder& dec) {
  auto n = v.raw_size(static_cast<size_t>(field));
  REQUIRE(n.ok());
  std::vector<uint8_t> out(*n);
  Status s = v.Decode(static_cast<size_t>(field), out.data(), out.size(), dec);
  INFO(s.ToString());
  REQUIRE(s.ok());
  return out;
}

// The box [start, start + size) of a row-major array, zero outside it.
std::vector<uint8_t> Crop(const std::vector<uint8_t>& full, const Shape& shape, const Shape& start, const Shape& size,
                          size_t esize) {
  const uint64_t n = *ElementCount(size);
  std::vector<uint8_t> out(n * esize, 0);
  for (uint64_t e = 0; e < n; ++e) {
    uint64_t rest = e, src = 0, stride = 1;
    bool inside = true;
    for (size_t a = size.size(); a-- > 0;) {
      const int64_t c = start[a] + static_cast<int64_t>(rest % static_cast<uint64_t>(size[a]));
      rest /= static_cast<uint64_t>(size[a]);
      inside = inside && c >= 0 && c < shape[a];
      src += static_cast<uint64_t>(c) * stride;
      stride *= static_cast<uint64_t>(shape[a]);
    }
    if (inside) std::memcpy(&out[e * esize], &full[src * esize], esize);
  }
  return out;
}

std::vector<int32_t> Rows(const std::vector<uint8_t>& bytes) {
  std::vector<int32_t> r(bytes.size() / 4);
  std::memcpy(r.data(), bytes.data(), r.size() * 4);
  return r;
}

ConvertOptions ChunkedOptions(Shape patch) {
  ConvertOptions o;
  o.patch_size = std::move(patch);
  o.fg_locations = kCap;
  o.seed = 5;
  return o;
}

}  // namespace

TEST_CASE("convert: --patch-size stores nnU-Net image and mask chunked and reads back the same voxels") {
  TempDir dir;
  const std::string src = dir / "Dataset002";
  const std::vector<Case> cases = MakeNnunet(src);
  auto r = RunConvert(src, dir / "out", ChunkedOptions({4, 4, 4}));  // chunks capped at 1.5x: 6^3
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  auto rb = Open(dir / "out");
  const Manifest& m = rb.ds->manifest();
  CHECK(m.format_version == 4);  // i16 images byte-shuffled, foreground locations delta-coded
  const int image = rb.Field("image"), mask = rb.Field("mask");
  CHECK(m.fields[image].filter == Filter::kByteShuffle);
  CHECK(m.fields[mask].filter == Filter::kNone);  // u8: nothing to shuffle
  CHECK(m.fields[rb.Field("mask.fg_locations")].filter == Filter::kDeltaColumns);
  CHECK(ProvenanceOption(m, "shuffle") == "true");
  const Shape image_chunk = ChooseChunkShape({2, 9, 11, 12}, {1, 4, 4, 4}, 2);
  CHECK(m.fields[image].chunk_shape == image_chunk);
  CHECK(m.fields[mask].chunk_shape == ChooseChunkShape({1, 9, 11, 12}, {1, 4, 4, 4}, 1));
  CHECK(image_chunk[1] < 9);  // really cut into several chunks per axis
  CHECK(ProvenanceOption(m, "patch_size") == "4x4x4");
  CHECK(ProvenanceOption(m, "chunk_shape") == ShapeToString(image_chunk));
  CHECK(FieldMeta(m.fields[image], "channel_names") == R"({"0":"T1","1":"T2"})");
  CHECK(FieldMeta(m.fields[mask], "labels") == R"({"background":0,"a":1,"b":2,"c":3})");
  for (const char* f : {"image.spacing", "mask.nifti_header", "path"}) CHECK_FALSE(m.fields[rb.Field(f)].chunked());
  Decoder dec;
  for (uint64_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    INFO("case " << c.name);
    REQUIRE(rb.Str(i, "path") == (c.mask.empty() ? "imagesTs/" : "imagesTr/") + c.name);
    auto v = rb.ds->Sample(i);
    REQUIRE(v.ok());
    const std::string dir_name = src + (c.mask.empty() ? "/imagesTs/" : "/imagesTr/") + c.name;
    std::vector<uint8_t> want = ItkVoxels(dir_name + "_0000.nii.gz"), ch1 = ItkVoxels(dir_name + "_0001.nii.gz");
    want.insert(want.end(), ch1.begin(), ch1.end());
    const std::vector<uint8_t> got = DecodeAll(*v, image, dec);
    CHECK(got == want);
    CHECK(*v->num_chunks(static_cast<size_t>(image)) >= 4);  // 2 channels x several chunks
    const Shape shape = {2, c.shape[1], c.shape[2], c.shape[3]};
    for (const Shape& start : {Shape{0, 1, 2, 3}, Shape{1, -2, 4, 5}, Shape{0, 3, -1, 2}}) {
      const Shape size = {2 - start[0], 5, 8, 6};
      std::vector<uint8_t> region(*ByteSize(size, DType::kI16));
      Status s = v->DecodeRegion(static_cast<size_t>(image), start, size, region.data(), region.size(), dec);
      INFO(s.ToString() << " start " << ShapeToString(start));
      REQUIRE(s.ok());
      CHECK(region == Crop(want, shape, start, size, 2));
    }
    if (!c.mask.empty()) {
      CHECK(DecodeAll(*v, mask, dec) == c.mask);
      const Shape start = {0, 2, 3, 4}, size = {1, 4, 4, 4};
      std::vector<uint8_t> region(64);
      REQUIRE(v->DecodeRegion(static_cast<size_t>(mask), start, size, region.data(), region.size(), dec).ok());
      CHECK(region == Crop(c.mask, c.shape, start, size, 1));
    } else {
      CHECK(*v->shape(static_cast<size_t>(mask)) == Shape{0, c.shape[1], c.shape[2], c.shape[3]});
    }
  }
}

TEST_CASE("convert: mask.fg_locations rows point at voxels of their class, capped per class, sorted by class") {
  TempDir dir;
  const std::string src = dir / "Dataset002";
  const std::vector<Case> cases = MakeNnunet(src);
  REQUIRE(RunConvert(src, dir / "out", ChunkedOptions({8, 8, 8})).ok());
  auto rb = Open(dir / "out");
  const FieldSpec& spec = rb.ds->manifest().fields[rb.Field("mask.fg_locations")];
  CHECK(spec.dtype == DType::kI32);
  CHECK(spec.shape == Shape{-1, 4});
  CHECK(FieldMeta(spec, "role") == "fg_locations");
  CHECK(ProvenanceOption(rb.ds->manifest(), "fg_locations") == std::to_string(kCap));
  Decoder dec;
  for (uint64_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    INFO("case " << c.name);
    auto v = rb.ds->Sample(i);
    REQUIRE(v.ok());
    const Shape ls = *v->shape(static_cast<size_t>(rb.Field("mask.fg_locations")));
    REQUIRE(ls.size() == 2);
    CHECK(ls[1] == 4);
    std::map<int, uint64_t> voxels;  // class -> voxel count in the source mask
    for (uint8_t x : c.mask)
      if (x != 0) ++voxels[x];
    if (voxels.empty()) {
      CHECK(ls[0] == 0);
      continue;
    }
    CHECK(voxels[1] > kCap);
    CHECK(voxels[3] == 3);
    const std::vector<int32_t> rows = Rows(DecodeAll(*v, rb.Field("mask.fg_locations"), dec));
    REQUIRE(rows.size() == static_cast<size_t>(ls[0] * 4));
    std::map<int, uint64_t> got;
    std::set<std::vector<int32_t>> seen;
    int last_class = 0;
    for (size_t r = 0; r < rows.size(); r += 4) {
      const int cls = rows[r];
      const int32_t z = rows[r + 1], y = rows[r + 2], x = rows[r + 3];
      REQUIRE(z >= 0);
      REQUIRE(y >= 0);
      REQUIRE(x >= 0);
      REQUIRE(z < c.shape[1]);
      REQUIRE(y < c.shape[2]);
      REQUIRE(x < c.shape[3]);
      CHECK(c.mask[static_cast<size_t>((z * c.shape[2] + y) * c.shape[3] + x)] == cls);
      CHECK(cls >= last_class);
      last_class = cls;
      ++got[cls];
      CHECK(seen.insert({z, y, x}).second);  // no voxel twice
    }
    for (const auto& [cls, n] : voxels) CHECK(got[cls] == std::min<uint64_t>(n, kCap));
    CHECK(got.size() == voxels.size());
  }
}

TEST_CASE("convert: the patch sampler centres forced patches on stored foreground of each class") {
  TempDir dir;
  const std::string src = dir / "Dataset002";
  const std::vector<Case> cases = MakeNnunet(src);
  REQUIRE(RunConvert(src, dir / "out", ChunkedOptions({4, 4, 4})).ok());
  auto rb = Open(dir / "out");
  PatchOptions po;
  po.patch = {4, 4, 4};
  auto sampler = PatchSampler::Create(rb.ds.get(), po);
  INFO(sampler.status().ToString());
  REQUIRE(sampler.ok());
  Decoder dec;
  std::set<int64_t> classes;
  for (uint64_t draw = 0; draw < 40; ++draw) {
    std::vector<uint8_t> image(*(*sampler)->ImageBytes(0)), label(*(*sampler)->LabelBytes(0));
    PatchInfo info;
    Status s = (*sampler)->Sample(0, draw, true, image.data(), image.size(), label.data(), label.size(), dec, &info);
    INFO(s.ToString());
    REQUIRE(s.ok());
    REQUIRE(info.fg_class > 0);
    classes.insert(info.fg_class);
    CHECK(std::count(label.begin(), label.end(), static_cast<uint8_t>(info.fg_class)) > 0);
  }
  CHECK(classes == std::set<int64_t>{1, 2, 3});
  std::vector<uint8_t> image(*(*sampler)->ImageBytes(1)), label(*(*sampler)->LabelBytes(1));
  PatchInfo info;
  REQUIRE((*sampler)->Sample(1, 0, true, image.data(), image.size(), label.data(), label.size(), dec, &info).ok());
  CHECK(info.fg_class == -1);  // no foreground stored: placed uniformly
}

TEST_CASE("convert: ITK's brain MRI and its segmentation give patches equal to padded crops of the ITK read") {
  const std::string data = "/usr/share/doc/insighttoolkit5-examples/examples/Data/";
  TempDir dir;
  MakeDirs(dir / "src/images");
  MakeDirs(dir / "src/masks");
  fs::copy_file(data + "KmeansTest_T1UCharRaw.nii.gz", dir / "src/images/brain.nii.gz");
  fs::copy_file(data + "KmeansTest_T1KmeansPrelimSegmentation.nii.gz", dir / "src/masks/brain.nii.gz");
  auto r = RunConvert(dir / "src", dir / "out", ChunkedOptions({32, 32, 32}));
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  auto rb = Open(dir / "out");
  const std::vector<uint8_t> image = ItkVoxels(dir / "src/images/brain.nii.gz");  // i16 62x128x128
  const std::vector<uint8_t> mask = ItkVoxels(dir / "src/masks/brain.nii.gz");    // u8 labels 0..6
  const Shape shape = {1, 62, 128, 128};
  REQUIRE(image.size() == 2 * 62 * 128 * 128);
  REQUIRE(mask.size() == 62 * 128 * 128);
  {
    Decoder whole;
    auto v = rb.ds->Sample(0);
    REQUIRE(v.ok());
    REQUIRE(DecodeAll(*v, rb.Field("image"), whole) == image);
    REQUIRE(DecodeAll(*v, rb.Field("mask"), whole) == mask);
  }
  PatchOptions po;
  po.patch = {72, 32, 32};  // deeper than the volume's 62 slices: every patch is padded in depth
  po.label_pad = 255;
  auto sampler = PatchSampler::Create(rb.ds.get(), po);
  REQUIRE(sampler.ok());
  const Shape chunk = rb.ds->manifest().fields[rb.Field("image")].chunk_shape;
  uint64_t touchable = 1;  // chunks a 72x32x32 box can touch, image and mask alike at most
  for (int a = 1; a < 4; ++a) touchable *= static_cast<uint64_t>((po.patch[a - 1] + chunk[a] - 1) / chunk[a] + 1);
  Decoder dec;
  std::set<int64_t> classes;
  int forced_hits = 0, padded_before = 0;
  for (uint64_t draw = 0; draw < 60; ++draw) {
    const bool forced = draw % 2 == 0;
    std::vector<uint8_t> got_image(*(*sampler)->ImageBytes(0)), got_mask(*(*sampler)->LabelBytes(0));
    PatchInfo info;
    const uint64_t before = dec.chunks_decoded();
    Status s = (*sampler)->Sample(0, draw, forced, got_image.data(), got_image.size(), got_mask.data(), got_mask.size(),
                                  dec, &info);
    INFO(s.ToString() << " draw " << draw << " start " << ShapeToString(info.start));
    REQUIRE(s.ok());
    CHECK(dec.chunks_decoded() - before <= 2 * touchable);
    const Shape size = {1, 72, 32, 32};
    REQUIRE(info.start.size() == 3);  // spatial
    const Shape start = {0, info.start[0], info.start[1], info.start[2]};
    padded_before += start[1] < 0;  // else the padding is all after the last slice
    CHECK(got_image == Crop(image, shape, start, size, 2));
    std::vector<uint8_t> want_mask = Crop(mask, shape, start, size, 1);
    for (uint64_t e = 0; e < want_mask.size(); ++e) {  // outside the volume: the label pad
      uint64_t rest = e;
      bool inside = true;
      for (int a = 3; a >= 1; --a) {
        const int64_t c = start[a] + static_cast<int64_t>(rest % static_cast<uint64_t>(size[a]));
        rest /= static_cast<uint64_t>(size[a]);
        inside = inside && c >= 0 && c < shape[a];
      }
      if (!inside) want_mask[e] = 255;
    }
    CHECK(got_mask == want_mask);
    if (forced && info.fg_class > 0) {
      classes.insert(info.fg_class);
      forced_hits += std::count(got_mask.begin(), got_mask.end(), static_cast<uint8_t>(info.fg_class)) > 0;
    }
  }
  CHECK(padded_before > 0);
  CHECK(forced_hits == 30);    // every forced patch holds its class
  CHECK(classes.size() >= 4);  // drawn among the six foreground labels
}

TEST_CASE("convert: foreground locations of one-hot and 2D masks are seeded and uniform") {
  FieldSpec spec;
  spec.dtype = DType::kU8;
  // One-hot [3, 4, 5]: channel 0 at two pixels, channel 2 at one; channel 1 empty.
  std::vector<uint8_t> onehot(60, 0);
  onehot[0 * 20 + 7] = 1;
  onehot[0 * 20 + 19] = 1;
  onehot[2 * 20 + 3] = 255;
  auto r = convert::detail::FgLocations(spec, FieldValue::Array(onehot, {3, 4, 5}), 10, 0, 0);
  REQUIRE(r.ok());
  CHECK(r->shape == Shape{3, 3});
  CHECK(Rows(r->bytes) == std::vector<int32_t>{1, 1, 2, 1, 3, 4, 3, 0, 3});

  // 1,000 voxels of class 2 and cap 10: different cases draw differently, the same case
  // always the same, and over many seeds every voxel is drawn about equally often.
  spec.dtype = DType::kF32;
  std::vector<float> labels(1000, 2.0f);
  std::vector<uint8_t> bytes(4000);
  std::memcpy(bytes.data(), labels.data(), bytes.size());
  const FieldValue mask = FieldValue::Array(bytes, {1, 10, 100});
  auto a = convert::detail::FgLocations(spec, mask, 10, 3, 0);
  auto b = convert::detail::FgLocations(spec, mask, 10, 3, 0);
  auto c = convert::detail::FgLocations(spec, mask, 10, 3, 1);
  REQUIRE((a.ok() && b.ok() && c.ok()));
  CHECK(a->shape == Shape{10, 3});
  CHECK(a->bytes == b->bytes);
  CHECK(a->bytes != c->bytes);
  std::vector<int> hits(1000, 0);
  for (uint64_t seed = 0; seed < 500; ++seed) {
    auto d = convert::detail::FgLocations(spec, mask, 10, seed, 7);
    REQUIRE(d.ok());
    const std::vector<int32_t> rows = Rows(d->bytes);
    for (size_t k = 0; k < rows.size(); k += 3) ++hits[static_cast<size_t>(rows[k + 1] * 100 + rows[k + 2])];
  }
  // Each voxel is drawn 5 times on average; a first-N or strided pick would leave most at 0.
  CHECK(std::count(hits.begin(), hits.end(), 0) < 30);
  CHECK(*std::max_element(hits.begin(), hits.end()) < 25);
  CHECK(std::count_if(hits.begin(), hits.begin() + 500, [](int h) { return h > 0; }) > 450);
  CHECK(std::count_if(hits.begin() + 500, hits.end(), [](int h) { return h > 0; }) > 450);
}

TEST_CASE("convert: chunked output is byte-identical for 1 and 3 threads") {
  TempDir dir;
  const std::string src = dir / "Dataset002";
  MakeNnunet(src);
  ConvertOptions o = ChunkedOptions({4, 8, 8});
  o.shard_bytes = 4096;  // several shards
  o.threads = 1;
  auto r1 = RunConvert(src, dir / "t1", o);
  INFO(r1.status().ToString());
  REQUIRE(r1.ok());
  CHECK(r1->shards > 1);
  o.threads = 3;
  o.window = 2;
  REQUIRE(RunConvert(src, dir / "t3", o).ok());
  CHECK(DirBytes(dir / "t1") == DirBytes(dir / "t3"));
  o.seed = 6;  // the seed moves the foreground locations, nothing else
  REQUIRE(RunConvert(src, dir / "s6", o).ok());
  auto a = Open(dir / "t1"), b = Open(dir / "s6");
  CHECK(a.ds->manifest().fields[a.Field("image")] == b.ds->manifest().fields[b.Field("image")]);
  Decoder dec;
  auto va = a.ds->Sample(0), vb = b.ds->Sample(0);
  REQUIRE((va.ok() && vb.ok()));
  CHECK(DecodeAll(*va, a.Field("image"), dec) == DecodeAll(*vb, b.Field("image"), dec));
  CHECK(DecodeAll(*va, a.Field("mask.fg_locations"), dec) != DecodeAll(*vb, b.Field("mask.fg_locations"), dec));
}

TEST_CASE(
    "convert: 16-bit volumes are byte-shuffled and locations delta-coded by default, --no-shuffle stores them as they "
    "are") {
  TempDir dir;
  const std::string src = dir / "Dataset002";
  MakeNnunet(src);
  ConvertOptions plain_options = ChunkedOptions({4, 4, 4});
  plain_options.shuffle = false;
  REQUIRE(RunConvert(src, dir / "shuffled", ChunkedOptions({4, 4, 4})).ok());
  REQUIRE(RunConvert(src, dir / "plain", plain_options).ok());
  auto s = Open(dir / "shuffled"), p = Open(dir / "plain");
  CHECK(s.ds->manifest().format_version == 4);
  CHECK(p.ds->manifest().format_version == 2);
  CHECK(p.ds->manifest().fields[p.Field("image")].filter == Filter::kNone);
  CHECK(p.ds->manifest().fields[p.Field("mask.fg_locations")].filter == Filter::kNone);
  CHECK(ProvenanceOption(p.ds->manifest(), "shuffle").empty());
  Decoder dec;
  for (uint64_t i = 0; i < s.ds->num_samples(); ++i) {
    auto vs = s.ds->Sample(i), vp = p.ds->Sample(i);
    REQUIRE((vs.ok() && vp.ok()));
    CHECK(DecodeAll(*vs, s.Field("image"), dec) == DecodeAll(*vp, p.Field("image"), dec));
    CHECK(DecodeAll(*vs, s.Field("mask.fg_locations"), dec) == DecodeAll(*vp, p.Field("mask.fg_locations"), dec));
  }
}

TEST_CASE("convert: 2D --patch-size HxW chunks images and without it the output stays version 1") {
  TempDir dir;
  for (int i = 0; i < 4; ++i)
    WritePng(dir / ("src/c" + std::to_string(i % 2) + "/" + std::to_string(i) + ".png"), 3, 20, 16 + i,
             static_cast<uint32_t>(i));
  REQUIRE(RunConvert(dir / "src", dir / "plain").ok());
  auto r = RunConvert(dir / "src", dir / "chunked", ChunkedOptions({8, 8}));
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  auto plain = Open(dir / "plain"), chunked = Open(dir / "chunked");
  CHECK(plain.ds->manifest().format_version == 1);
  CHECK(ProvenanceOption(plain.ds->manifest(), "patch_size").empty());
  const Manifest& m = chunked.ds->manifest();
  CHECK(m.format_version == 2);
  CHECK(m.fields[chunked.Field("image")].chunk_shape == ChooseChunkShape({3, 20, 19}, {1, 8, 8}, 1));
  CHECK(m.FindField("mask.fg_locations") < 0);  // no mask, no locations
  Decoder dec;
  for (uint64_t i = 0; i < 4; ++i) {
    auto v = chunked.ds->Sample(i);
    REQUIRE(v.ok());
    CHECK(DecodeAll(*v, chunked.Field("image"), dec) == plain.Array(i, "image"));
  }
}

TEST_CASE("convert: bad --patch-size values are refused with a clear message", "[subprocess]") {
  for (const char* bad :
       {"", "64", "0x64x64", "64x64x64x64", "axb", "64x", "x64", "-1x4", "1e3x4x4", "9999999999x2", "64X64"}) {
    INFO("'" << bad << "'");
    auto p = ParsePatchSize(bad);
    REQUIRE_FALSE(p.ok());
    CHECK(p.status().message().find("--patch-size '" + std::string(bad) + "'") != std::string::npos);
  }
  CHECK(*ParsePatchSize("128x96x64") == Shape{128, 96, 64});
  CHECK(*ParsePatchSize("512x256") == Shape{512, 256});
  CHECK(ExtentsToString({128, 96, 64}) == "128x96x64");

  TempDir dir;
  WritePng(dir / "src/a/0.png", 1, 8, 8, 1);
  auto r = RunConvert(dir / "src", dir / "out", ChunkedOptions({4, 4, 4}));
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("has 3 axes, but the images have 2 spatial axes") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "out/manifest.sfm"));

  const std::string bin =
      std::string(SHARDIFY_BIN) + " '" + dir.path() + "/src' -o '" + dir.path() + "/cli' --no-fsync";
  std::string out;
  CHECK(Shell(bin + " --patch-size 0x4x4", &out) == 2);
  CHECK(out.find("--patch-size '0x4x4'") != std::string::npos);
  out.clear();
  CHECK(Shell(bin + " --fg-locations 5", &out) == 2);  // needs --patch-size
  CHECK(out.find("--patch-size") != std::string::npos);
  out.clear();
  CHECK(Shell(bin + " --patch-size 4x4x4", &out) == 1);
  CHECK(out.find("spatial axes") != std::string::npos);
  out.clear();
  CHECK(Shell(bin + " --patch-size 4x4 -q", &out) == 0);
  CHECK(out.find("chunks [") != std::string::npos);
  out.clear();
  CHECK(Shell(std::string(SHARDIFY_BIN) + " --help", &out) == 0);
  CHECK(out.find("--patch-size") != std::string::npos);
  CHECK(out.find("--fg-locations") != std::string::npos);
}

TEST_CASE("convert: --codec raw stores every array and chunk raw and unshuffled, --codec auto picks it for small data",
          "[subprocess]") {
  TempDir dir;
  const std::string src = dir / "Dataset002";
  MakeNnunet(src);
  ConvertOptions raw = ChunkedOptions({4, 4, 4});
  raw.codec = CodecChoice::kRaw;
  ConvertOptions automatic = ChunkedOptions({4, 4, 4});
  automatic.codec = CodecChoice::kAuto;  // a few KiB of volumes: raw
  REQUIRE(RunConvert(src, dir / "zstd", ChunkedOptions({4, 4, 4})).ok());
  auto summary = RunConvert(src, dir / "raw", raw);
  REQUIRE(summary.ok());
  CHECK(summary->codec == "raw");
  CHECK(FormatSummary(*summary).find("stored raw") != std::string::npos);
  REQUIRE(RunConvert(src, dir / "auto", automatic).ok());
  CHECK(DirBytes(dir / "auto") == DirBytes(dir / "raw"));
  auto z = Open(dir / "zstd"), r = Open(dir / "raw");
  CHECK(r.ds->manifest().format_version == 2);  // chunked, not filtered
  CHECK(r.ds->manifest().fields[r.Field("image")].filter == Filter::kNone);
  CHECK(ProvenanceOption(r.ds->manifest(), "codec") == "raw");
  CHECK(ProvenanceOption(z.ds->manifest(), "codec").empty());  // zstd output stays as it was
  Decoder dec;
  for (uint64_t i = 0; i < r.ds->num_samples(); ++i) {
    auto vz = z.ds->Sample(i), vr = r.ds->Sample(i);
    REQUIRE((vz.ok() && vr.ok()));
    for (const char* name : {"image", "mask", "mask.fg_locations"}) {
      CHECK(DecodeAll(*vz, z.Field(name), dec) == DecodeAll(*vr, r.Field(name), dec));
      const size_t f = static_cast<size_t>(r.Field(name));
      if (r.ds->manifest().fields[f].chunked()) {
        for (uint64_t k = 0; k < *vr->num_chunks(f); ++k) CHECK(vr->chunk(f, k)->codec == Codec::kRaw);
      } else {
        CHECK(vr->blob(f)->codec == Codec::kRaw);
      }
    }
  }
  std::string out;
  const std::string base = std::string(SHARDIFY_BIN) + " '" + src + "' -o '" + dir.path() + "/cli' --no-fsync ";
  CHECK(Shell(base + "--codec raw --level 5", &out) == 2);
  CHECK(out.find("--codec raw") != std::string::npos);
  CHECK(Shell(base + "--codec raw --dict", &out) == 2);
  CHECK(Shell(base + "--codec lz4", &out) == 2);
  CHECK_FALSE(fs::exists(dir / "cli"));
}
