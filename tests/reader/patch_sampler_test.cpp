#include "reader/patch_sampler.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <set>

#include "format/dataset.h"
#include "format/writer.h"
#include "reader/loader.h"
#include "tests/common/temp_dir.h"

using namespace shardify;

namespace {

constexpr int64_t D = 20, H = 24, W = 28;

uint16_t Voxel(int64_t i, int64_t z, int64_t y, int64_t x) {
  return static_cast<uint16_t>(i * 5000 + z * 300 + y * 11 + x);
}

// Class 1 fills a 2x2x2 cube at (2, 3, 4); class 2 (sample 0 only) a cube at (15, 18, 20).
uint8_t Label(int64_t i, int64_t z, int64_t y, int64_t x) {
  if (z >= 2 && z < 4 && y >= 3 && y < 5 && x >= 4 && x < 6) return 1;
  if (i == 0 && z >= 15 && z < 17 && y >= 18 && y < 20 && x >= 20 && x < 22) return 2;
  return 0;
}

struct VolumeFixture {
  testing::TempDir tmp;
  std::unique_ptr<Dataset> ds;
  explicit VolumeFixture(Codec codec = Codec::kZstd) {
    FieldSpec image{"image", FieldKind::kNdarray, DType::kU16, {1, D, H, W}, {}, {}};
    FieldSpec mask{"mask", FieldKind::kNdarray, DType::kU8, {1, D, H, W}, {}, {}};
    FieldSpec locs{"mask.fg_locations", FieldKind::kNdarray, DType::kI32, {-1, 4}, {}, {}};
    image.chunk_shape = mask.chunk_shape = {1, 8, 8, 8};
    WriterOptions o;
    o.fsync = false;
    o.codec = codec;
    auto w = DatasetWriter::Create(tmp.path(), {image, mask, locs}, o);
    REQUIRE(w.ok());
    for (int64_t i = 0; i < 3; ++i) {
      std::vector<uint8_t> img(D * H * W * 2), lab(D * H * W);
      std::vector<int32_t> rows;
      size_t n = 0;
      for (int64_t z = 0; z < D; ++z)
        for (int64_t y = 0; y < H; ++y)
          for (int64_t x = 0; x < W; ++x, ++n) {
            const uint16_t v = Voxel(i, z, y, x);
            std::memcpy(&img[n * 2], &v, 2);
            lab[n] = Label(i, z, y, x);
            if (lab[n]) rows.insert(rows.end(), {lab[n], int32_t(z), int32_t(y), int32_t(x)});
          }
      std::vector<uint8_t> locs_bytes(rows.size() * 4);
      std::memcpy(locs_bytes.data(), rows.data(), locs_bytes.size());
      SampleInput s;
      s.values = {FieldValue::Array(img, {1, D, H, W}), FieldValue::Array(lab, {1, D, H, W}),
                  FieldValue::Array(locs_bytes, {int64_t(rows.size() / 4), 4})};
      REQUIRE((*w)->Append(std::move(s)).ok());
    }
    REQUIRE((*w)->Finish().ok());
    ds = std::move(Dataset::Open(tmp.path())).value();
  }
};

PatchOptions Options(Shape patch) {
  PatchOptions o;
  o.patch = std::move(patch);
  o.seed = 9;
  o.label_pad = -1;
  return o;
}

}  // namespace

TEST_CASE("reader patches: a patch equals the same crop of the volume, borders padded") {
  VolumeFixture fx;
  auto ps = PatchSampler::Create(fx.ds.get(), Options({10, 30, 12}));  // wider than the volume in y
  REQUIRE(ps.ok());
  Decoder d;
  std::vector<uint8_t> img(*(*ps)->ImageBytes(0)), lab(*(*ps)->LabelBytes(0));
  CHECK(img.size() == 10 * 30 * 12 * 2);
  for (uint64_t draw = 0; draw < 20; ++draw) {
    const uint64_t i = draw % 3;
    PatchInfo info;
    REQUIRE((*ps)->Sample(i, draw, draw % 2 == 0, img.data(), img.size(), lab.data(), lab.size(), d, &info).ok());
    size_t n = 0;
    for (int64_t z = 0; z < 10; ++z)
      for (int64_t y = 0; y < 30; ++y)
        for (int64_t x = 0; x < 12; ++x, ++n) {
          const int64_t a = info.start[0] + z, b = info.start[1] + y, c = info.start[2] + x;
          const bool in = a >= 0 && a < D && b >= 0 && b < H && c >= 0 && c < W;
          uint16_t v;
          std::memcpy(&v, &img[n * 2], 2);
          REQUIRE(v == (in ? Voxel(int64_t(i), a, b, c) : 0));
          REQUIRE(lab[n] == (in ? Label(int64_t(i), a, b, c) : 255));
        }
  }
}

TEST_CASE("reader patches: a margin reads the box grown around the same patch position") {
  VolumeFixture fx;
  PatchOptions plain = Options({6, 8, 4});
  PatchOptions wide = plain;
  wide.margin = {3, 0, 5};
  CHECK(wide.ReadShape() == Shape{12, 8, 14});
  CHECK(plain.ReadShape() == plain.patch);
  auto a = PatchSampler::Create(fx.ds.get(), plain);
  auto b = PatchSampler::Create(fx.ds.get(), wide);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(*(*b)->ImageBytes(0) == 12 * 8 * 14 * 2);
  CHECK(*(*b)->LabelBytes(0) == 12 * 8 * 14);
  Decoder d;
  std::vector<uint8_t> img(12 * 8 * 14 * 2), lab(12 * 8 * 14), small_img(6 * 8 * 4 * 2), small_lab(6 * 8 * 4);
  for (uint64_t draw = 0; draw < 12; ++draw) {
    const uint64_t i = draw % 3;
    const bool forced = draw % 2 == 1;
    PatchInfo pa, pb;
    REQUIRE(
        (*a)->Sample(i, draw, forced, small_img.data(), small_img.size(), small_lab.data(), small_lab.size(), d, &pa)
            .ok());
    REQUIRE((*b)->Sample(i, draw, forced, img.data(), img.size(), lab.data(), lab.size(), d, &pb).ok());
    REQUIRE(pa.start == pb.start);  // the margin does not move the patch
    size_t n = 0;
    for (int64_t z = 0; z < 12; ++z)
      for (int64_t y = 0; y < 8; ++y)
        for (int64_t x = 0; x < 14; ++x, ++n) {
          const int64_t p = pb.start[0] - 3 + z, q = pb.start[1] + y, r = pb.start[2] - 5 + x;
          const bool in = p >= 0 && p < D && q >= 0 && q < H && r >= 0 && r < W;
          uint16_t v;
          std::memcpy(&v, &img[n * 2], 2);
          REQUIRE(v == (in ? Voxel(int64_t(i), p, q, r) : 0));
          REQUIRE(lab[n] == (in ? Label(int64_t(i), p, q, r) : 255));
        }
  }
  wide.margin = {1, 1};
  CHECK(PatchSampler::Create(fx.ds.get(), wide).status().code() == StatusCode::kInvalidArgument);
  wide.margin = {1, -1, 1};
  CHECK(PatchSampler::Create(fx.ds.get(), wide).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("reader patches: the Loader's patch mode reads the margin too") {
  VolumeFixture fx;
  std::shared_ptr<const Dataset> ds(std::move(fx.ds));
  LoaderOptions o;
  o.batch_size = 2;
  o.sampler.epochs = 1;
  o.patch = Options({6, 6, 6});
  o.patch->margin = {2, 1, 0};
  auto loader = Loader::Open(ds, o);
  REQUIRE(loader.ok());
  auto b = (*loader)->Next();
  REQUIRE(b.ok());
  REQUIRE(*b);
  CHECK((*b)->Find("image")->shape == Shape{2, 1, 10, 8, 6});
  CHECK((*b)->Find("mask")->shape == Shape{2, 1, 10, 8, 6});
}

TEST_CASE("reader patches: positions are deterministic per sample and draw") {
  VolumeFixture fx;
  auto ps = PatchSampler::Create(fx.ds.get(), Options({8, 8, 8}));
  Decoder d;
  std::vector<uint8_t> img(8 * 8 * 8 * 2), lab(8 * 8 * 8);
  std::set<Shape> starts;
  for (uint64_t draw = 0; draw < 10; ++draw) {
    PatchInfo a, b;
    REQUIRE((*ps)->Sample(1, draw, false, img.data(), img.size(), lab.data(), lab.size(), d, &a).ok());
    REQUIRE((*ps)->Sample(1, draw, false, img.data(), img.size(), lab.data(), lab.size(), d, &b).ok());
    CHECK(a.start == b.start);
    starts.insert(a.start);
  }
  CHECK(starts.size() > 5);
}

TEST_CASE("reader patches: forced draws hold foreground, and the batch fraction holds") {
  VolumeFixture fx;
  auto ps = PatchSampler::Create(fx.ds.get(), Options({6, 6, 6}));
  REQUIRE(ps.ok());
  Decoder d;
  std::vector<uint8_t> img(6 * 6 * 6 * 2), lab(6 * 6 * 6);
  const size_t batch = 6;
  size_t with_fg = 0, total = 0;
  std::set<int64_t> classes;
  for (uint64_t b = 0; b < 200; ++b)
    for (size_t slot = 0; slot < batch; ++slot) {
      const bool forced = (*ps)->Forced(slot, batch);
      PatchInfo info;
      REQUIRE((*ps)
                  ->Sample(b % 3, b * batch + slot, forced, img.data(), img.size(), lab.data(), lab.size(), d, &info)
                  .ok());
      bool fg = false;
      for (uint8_t v : lab) fg = fg || (v > 0 && v != 255);
      if (forced) {
        REQUIRE(fg);
        classes.insert(info.fg_class);
      }
      with_fg += fg;
      ++total;
    }
  CHECK((*ps)->Forced(5, 6));
  CHECK((*ps)->Forced(4, 6));
  CHECK_FALSE((*ps)->Forced(3, 6));
  CHECK(double(with_fg) / total >= 2.0 / 6);
  CHECK(classes == std::set<int64_t>{1, 2});  // both classes of sample 0 get chosen
}

TEST_CASE("reader patches: a case's foreground locations are decoded once, and the draws stay the same") {
  VolumeFixture fx;
  PatchOptions uncached = Options({6, 6, 6});
  uncached.locations_cache_bytes = 0;
  PatchOptions tiny = Options({6, 6, 6});
  tiny.locations_cache_bytes = 1;  // nothing fits: every draw decodes, as without a cache
  auto cached = PatchSampler::Create(fx.ds.get(), Options({6, 6, 6}));
  auto plain = PatchSampler::Create(fx.ds.get(), uncached);
  auto small = PatchSampler::Create(fx.ds.get(), tiny);
  REQUIRE(cached.ok());
  REQUIRE(plain.ok());
  REQUIRE(small.ok());
  Decoder d;
  std::vector<uint8_t> img(6 * 6 * 6 * 2), lab(6 * 6 * 6);
  uint64_t draws = 0;
  for (uint64_t epoch = 0; epoch < 4; ++epoch) {
    for (uint64_t i = 0; i < 3; ++i, ++draws) {
      PatchInfo a, b, c;
      REQUIRE((*cached)->Sample(i, draws, true, img.data(), img.size(), lab.data(), lab.size(), d, &a).ok());
      REQUIRE((*plain)->Sample(i, draws, true, img.data(), img.size(), lab.data(), lab.size(), d, &b).ok());
      REQUIRE((*small)->Sample(i, draws, true, img.data(), img.size(), lab.data(), lab.size(), d, &c).ok());
      CHECK(a.start == b.start);
      CHECK(a.fg_class == b.fg_class);
      CHECK(c.start == b.start);
    }
  }
  CHECK((*cached)->locations_decoded() == 3);  // once per case, over 4 epochs
  CHECK((*plain)->locations_decoded() == draws);
  CHECK((*small)->locations_decoded() == draws);
}

TEST_CASE("reader patches: only the chunks a patch touches are decoded") {
  VolumeFixture fx;
  auto ps = PatchSampler::Create(fx.ds.get(), Options({8, 8, 8}));
  Decoder d;
  std::vector<uint8_t> img(8 * 8 * 8 * 2);
  PatchInfo info;
  PatchOptions o = Options({8, 8, 8});
  o.label_field.clear();
  o.chunk_cache_bytes = 0;  // every patch decodes what it touches
  auto images_only = PatchSampler::Create(fx.ds.get(), o);
  REQUIRE(images_only.ok());
  for (uint64_t draw = 0; draw < 30; ++draw) {
    const uint64_t before = d.chunks_decoded();
    REQUIRE((*images_only)->Sample(0, draw, false, img.data(), img.size(), nullptr, 0, d, &info).ok());
    uint64_t expect = 1;
    const int64_t dims[] = {D, H, W};
    for (int a = 0; a < 3; ++a) {
      const int64_t lo = std::max<int64_t>(info.start[a], 0), hi = std::min<int64_t>(info.start[a] + 8, dims[a]);
      expect *= uint64_t((hi - 1) / 8 - lo / 8 + 1);
    }
    CHECK(d.chunks_decoded() - before == expect);
    CHECK(expect < 3 * 3 * 4);  // the whole volume has 36 chunks
  }
}

TEST_CASE("reader patches: decoded chunks are kept within their bound, and raw chunks read in place") {
  VolumeFixture zstd, raw(Codec::kRaw);
  PatchOptions uncached = Options({8, 9, 10}), small = uncached;
  uncached.chunk_cache_bytes = 0;
  small.chunk_cache_bytes = 3 * 8 * 8 * 8 * 2;  // three image chunks
  auto plain = PatchSampler::Create(zstd.ds.get(), uncached);
  auto cached = PatchSampler::Create(zstd.ds.get(), Options({8, 9, 10}));
  auto bounded = PatchSampler::Create(zstd.ds.get(), small);
  auto in_place = PatchSampler::Create(raw.ds.get(), uncached);
  REQUIRE((plain.ok() && cached.ok() && bounded.ok() && in_place.ok()));
  REQUIRE((*cached)->chunk_cache() != nullptr);
  CHECK((*plain)->chunk_cache() == nullptr);
  const size_t ib = *(*plain)->ImageBytes(0), lb = *(*plain)->LabelBytes(0);
  Decoder d;
  uint64_t cached_decodes = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (uint64_t draw = 0; draw < 24; ++draw) {
      std::vector<std::vector<uint8_t>> img(4, std::vector<uint8_t>(ib)), lab(4, std::vector<uint8_t>(lb));
      const uint64_t i = draw % 3;
      const bool forced = draw % 3 == 0;
      const PatchSampler* samplers[] = {plain->get(), cached->get(), bounded->get(), in_place->get()};
      for (size_t k = 0; k < 4; ++k) {
        const uint64_t before = d.chunks_decoded();
        REQUIRE(samplers[k]->Sample(i, draw, forced, img[k].data(), ib, lab[k].data(), lb, d).ok());
        if (k == 1) cached_decodes += d.chunks_decoded() - before;
      }
      for (size_t k = 1; k < 4; ++k) {
        REQUIRE(img[k] == img[0]);
        REQUIRE(lab[k] == lab[0]);
      }
    }
  }
  // The second pass draws the same patches again: every chunk comes from the cache.
  const ChunkCache& cache = *(*cached)->chunk_cache();
  CHECK(cached_decodes == cache.misses());
  CHECK(cache.hits() > cache.misses());
  CHECK(cache.bytes() <= cache.capacity());
  CHECK((*bounded)->chunk_cache()->bytes() <= small.chunk_cache_bytes);
  CHECK((*bounded)->chunk_cache()->bytes() > 0);
}

TEST_CASE("reader patches: a corrupt raw chunk is named, read in place or not") {
  VolumeFixture raw(Codec::kRaw);
  auto ps = PatchSampler::Create(raw.ds.get(), Options({8, 8, 8}));
  REQUIRE(ps.ok());
  Result<SampleView> v = raw.ds->Sample(1);
  REQUIRE(v.ok());
  Result<BlobInfo> chunk = v->chunk(0, 0);
  REQUIRE(chunk.ok());
  const std::string shard = raw.tmp.path() + "/" + v->shard_file();
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    REQUIRE(f.good());
    f.seekp(static_cast<std::streamoff>(chunk->offset + 5));
    const char flip = 0x5a;
    f.write(&flip, 1);
  }
  for (const IoMode io : {IoMode::kMmap, IoMode::kPread}) {  // in place from the mapping, or copied
    ReadOptions read;
    read.io = io;
    auto reopened = Dataset::Open(raw.tmp.path(), read);
    REQUIRE(reopened.ok());
    auto again = PatchSampler::Create(reopened->get(), Options({8, 8, 8}));
    REQUIRE(again.ok());
    Decoder d;
    std::vector<uint8_t> img(*(*again)->ImageBytes(1)), lab(*(*again)->LabelBytes(1));
    Status bad;
    for (uint64_t draw = 0; draw < 64 && bad.ok(); ++draw) {
      bad = (*again)->Sample(1, draw, false, img.data(), img.size(), lab.data(), lab.size(), d);
    }
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.code() == StatusCode::kCorruption);
    CHECK_THAT(bad.ToString(), Catch::Contains("chunk 0") && Catch::Contains("sample 1"));
  }
}

TEST_CASE("reader patches: bad options are refused") {
  VolumeFixture fx;
  CHECK(PatchSampler::Create(fx.ds.get(), Options({})).status().code() == StatusCode::kInvalidArgument);
  CHECK(PatchSampler::Create(fx.ds.get(), Options({0, 4, 4})).status().code() == StatusCode::kInvalidArgument);
  PatchOptions o = Options({4, 4, 4});
  o.image_field = "nope";
  CHECK(PatchSampler::Create(fx.ds.get(), o).status().code() == StatusCode::kNotFound);
  o = Options({4, 4, 4});
  o.foreground_fraction = 1.5;
  CHECK(PatchSampler::Create(fx.ds.get(), o).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("reader patches: the Loader's patch mode gives fixed batches whatever the threads") {
  VolumeFixture fx;
  std::shared_ptr<const Dataset> ds(std::move(fx.ds));
  auto run = [&](size_t threads) {
    LoaderOptions o;
    o.batch_size = 6;
    o.threads = threads;
    o.sampler.epochs = 4;
    o.sampler.seed = 3;
    o.patch = Options({6, 6, 6});
    auto loader = Loader::Open(ds, o);
    REQUIRE(loader.ok());
    std::vector<std::vector<uint8_t>> out;
    size_t fg_in_forced = 0, forced = 0;
    while (true) {
      auto b = (*loader)->Next();
      REQUIRE(b.ok());
      if (!*b) break;
      const BatchField* img = (*b)->Find("image");
      const BatchField* lab = (*b)->Find("mask");
      REQUIRE(img != nullptr);
      REQUIRE(lab != nullptr);
      REQUIRE((*b)->fields.size() == 2);
      CHECK(img->shape == Shape{int64_t((*b)->size()), 1, 6, 6, 6});
      CHECK(lab->shape == Shape{int64_t((*b)->size()), 1, 6, 6, 6});
      const auto* l = static_cast<const uint8_t*>(lab->data);
      for (size_t j = 0; j < (*b)->size(); ++j) {
        if (j + 1 < (*b)->size()) continue;  // the last slot of each batch is forced
        ++forced;
        bool fg = false;
        for (size_t k = 0; k < 216; ++k) fg = fg || (l[j * 216 + k] > 0 && l[j * 216 + k] != 255);
        fg_in_forced += fg;
      }
      const auto* p = static_cast<const uint8_t*>(img->data);
      out.emplace_back(p, p + img->bytes);
    }
    CHECK(fg_in_forced == forced);
    return out;
  };
  const auto one = run(1);
  CHECK(one.size() == 4);  // 3 samples, batch 6: one partial batch per epoch
  CHECK(run(2) == one);
  CHECK(run(4) == one);
}

TEST_CASE("reader patches: a resumed patch Loader draws the patches of the uninterrupted run") {
  VolumeFixture fx;
  std::shared_ptr<const Dataset> ds(std::move(fx.ds));
  LoaderOptions o;
  o.batch_size = 2;
  o.sampler.epochs = 3;
  o.sampler.seed = 5;
  o.patch = Options({6, 6, 6});
  auto collect = [&](const LoaderOptions& opts, size_t max) {
    auto loader = Loader::Open(ds, opts);
    REQUIRE(loader.ok());
    std::vector<std::vector<uint8_t>> out;
    for (size_t k = 0; k < max; ++k) {
      auto b = (*loader)->Next();
      REQUIRE(b.ok());
      if (!*b) break;
      const BatchField* img = (*b)->Find("image");
      const auto* p = static_cast<const uint8_t*>(img->data);
      out.emplace_back(p, p + img->bytes);
    }
    return std::make_pair(out, (*loader)->State());
  };
  const auto full = collect(o, SIZE_MAX).first;
  REQUIRE(full.size() == 6);  // 3 samples, batch 2: 2 batches an epoch
  for (size_t cut : {1u, 2u, 3u, 5u}) {
    const auto head = collect(o, cut);
    LoaderOptions resumed = o;
    resumed.sampler.resume = head.second;
    const auto tail = collect(resumed, SIZE_MAX).first;
    INFO("cut " << cut);
    REQUIRE(cut + tail.size() == full.size());
    for (size_t k = 0; k < tail.size(); ++k) CHECK(tail[k] == full[cut + k]);
  }
}
