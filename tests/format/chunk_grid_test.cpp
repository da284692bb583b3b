#include "format/chunk_grid.h"

#include <catch2/catch.hpp>
#include <cstring>

#include "base/file.h"
#include "fixtures.h"
#include "format/chunking.h"
#include "format/dataset.h"
#include "format/writer.h"
#include "tests/common/temp_dir.h"

using namespace shardify;
using namespace shardify::testing;

namespace {

// A volume whose every voxel encodes its coordinates, so misplaced copies show.
std::vector<uint8_t> Volume(const Shape& s) {
  std::vector<uint8_t> v(static_cast<size_t>(*ByteSize(s, DType::kU16)));
  uint64_t n = 0;
  for (int64_t z = 0; z < s[0]; ++z)
    for (int64_t y = 0; y < s[1]; ++y)
      for (int64_t x = 0; x < s[2]; ++x, ++n) {
        const auto val = static_cast<uint16_t>(z * 1000 + y * 37 + x);
        std::memcpy(&v[n * 2], &val, 2);
      }
  return v;
}

// The reference crop, with `pad` outside the volume.
std::vector<uint8_t> Crop(const std::vector<uint8_t>& vol, const Shape& s, const Shape& start, const Shape& size,
                          uint16_t pad) {
  std::vector<uint8_t> out(static_cast<size_t>(*ByteSize(size, DType::kU16)));
  uint64_t n = 0;
  for (int64_t z = 0; z < size[0]; ++z)
    for (int64_t y = 0; y < size[1]; ++y)
      for (int64_t x = 0; x < size[2]; ++x, ++n) {
        const int64_t a = start[0] + z, b = start[1] + y, c = start[2] + x;
        uint16_t v = pad;
        if (a >= 0 && b >= 0 && c >= 0 && a < s[0] && b < s[1] && c < s[2])
          std::memcpy(&v, &vol[static_cast<size_t>(((a * s[1] + b) * s[2] + c) * 2)], 2);
        std::memcpy(&out[n * 2], &v, 2);
      }
  return out;
}

struct ChunkedFixture {
  TempDir tmp;
  std::vector<Shape> shapes = {{20, 33, 17}, {7, 8, 9}, {16, 16, 16}};
  explicit ChunkedFixture(Shape chunk = {4, 8, 5}) {
    FieldSpec vol{"image", FieldKind::kNdarray, DType::kU16, {-1, -1, -1}, {}, {}};
    vol.chunk_shape = chunk;
    WriterOptions o;
    o.fsync = false;
    auto w = DatasetWriter::Create(tmp.path(), {vol, {"label", FieldKind::kInt, DType::kU8, {}, {}, {}}}, o);
    REQUIRE(w.ok());
    for (size_t i = 0; i < shapes.size(); ++i) {
      SampleInput s;
      s.values = {FieldValue::Array(Volume(shapes[i]), shapes[i]), FieldValue::Int(static_cast<int64_t>(i))};
      REQUIRE((*w)->Append(std::move(s)).ok());
    }
    REQUIRE((*w)->Finish().ok());
  }
};

}  // namespace

TEST_CASE("format chunks: grids clip edge chunks and copies land in place") {
  auto g = MakeChunkGrid({10, 7}, {4, 4});
  REQUIRE(g.ok());
  CHECK(g->grid == Shape{3, 2});
  CHECK(g->count == 6);
  Shape origin, extent;
  ChunkBox(*g, 5, &origin, &extent);
  CHECK(origin == Shape{8, 4});
  CHECK(extent == Shape{2, 3});
  CHECK_FALSE(MakeChunkGrid({10, 7}, {4}).ok());
  CHECK_FALSE(MakeChunkGrid({10, 7}, {4, 0}).ok());
}

TEST_CASE("format chunks: a chunked dataset is version 2 and decodes whole") {
  ChunkedFixture fx;
  auto ds = Dataset::Open(fx.tmp.path());
  REQUIRE(ds.ok());
  CHECK((*ds)->manifest().format_version == 2);
  CHECK((*ds)->manifest().fields[0].chunk_shape == Shape{4, 8, 5});
  Decoder d;
  for (size_t i = 0; i < fx.shapes.size(); ++i) {
    auto v = (*ds)->Sample(i);
    REQUIRE(v.ok());
    CHECK(*v->shape(0) == fx.shapes[i]);
    CHECK(v->blob(0).status().code() == StatusCode::kInvalidArgument);
    std::vector<uint8_t> out(*v->raw_size(0));
    REQUIRE(v->Decode(0, out.data(), out.size(), d).ok());
    CHECK(out == Volume(fx.shapes[i]));
  }
  CHECK(*(*ds)->Sample(0)->num_chunks(0) == 5 * 5 * 4);
}

TEST_CASE("format chunks: a region equals the same crop bit for bit, borders included") {
  ChunkedFixture fx;
  auto ds = Dataset::Open(fx.tmp.path());
  REQUIRE(ds.ok());
  Decoder d;
  auto v = (*ds)->Sample(0);
  REQUIRE(v.ok());
  const std::vector<uint8_t> vol = Volume(fx.shapes[0]);
  const uint16_t pad = 0xBEEF;
  const Shape starts[] = {{0, 0, 0}, {3, 7, 4}, {-2, -3, -1}, {15, 30, 10}, {19, 32, 16}, {-5, 40, 0}};
  const Shape size = {6, 9, 8};
  for (const Shape& start : starts) {
    INFO(ShapeToString(start));
    std::vector<uint8_t> out(*ByteSize(size, DType::kU16));
    REQUIRE(v->DecodeRegion(0, start, size, out.data(), out.size(), d, &pad).ok());
    CHECK(out == Crop(vol, fx.shapes[0], start, size, pad));
  }
}

TEST_CASE("format chunks: only the chunks a region touches are decoded") {
  ChunkedFixture fx;
  auto ds = Dataset::Open(fx.tmp.path());
  REQUIRE(ds.ok());
  Decoder d;
  auto v = (*ds)->Sample(0);
  REQUIRE(v.ok());
  std::vector<uint8_t> out(4 * 8 * 5 * 2);
  REQUIRE(v->DecodeRegion(0, {4, 8, 5}, {4, 8, 5}, out.data(), out.size(), d).ok());
  CHECK(d.chunks_decoded() == 1);  // exactly one aligned chunk
  REQUIRE(v->DecodeRegion(0, {3, 7, 4}, {2, 2, 2}, out.data(), out.size(), d).ok());
  CHECK(d.chunks_decoded() == 1 + 8);  // a corner shared by 2x2x2 chunks
  std::vector<uint8_t> whole(*v->raw_size(0));
  REQUIRE(v->Decode(0, whole.data(), whole.size(), d).ok());
  CHECK(d.chunks_decoded() == 9 + 100);
}

TEST_CASE("format chunks: regions of unchunked fields work the same way") {
  TempDir tmp;
  REQUIRE(WriteSmallDataset(tmp.path(), 3).ok());
  auto ds = Dataset::Open(tmp.path());
  REQUIRE(ds.ok());
  Decoder d;
  auto v = (*ds)->Sample(1);
  REQUIRE(v.ok());
  std::vector<uint8_t> out(1 * 3 * 3);
  REQUIRE(v->DecodeRegion(0, {0, 6, 6}, {1, 3, 3}, out.data(), out.size(), d).ok());
  const std::vector<uint8_t> src = Pattern(64, 1);
  CHECK(out[0] == src[6 * 8 + 6]);
  CHECK(out[1] == src[6 * 8 + 7]);
  CHECK(out[2] == 0);  // past the edge
  CHECK(out[8] == 0);
  CHECK(v->DecodeRegion(0, {0, 0}, {1, 1}, out.data(), out.size(), d).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("format chunks: a corrupt chunk is reported by chunk and sample") {
  ChunkedFixture fx({4, 4, 4});
  uint64_t off = 0;  // a byte of chunk 3 of sample 1 in the shard file
  {
    auto ds = Dataset::Open(fx.tmp.path());
    REQUIRE(ds.ok());
    auto s0 = (*ds)->Sample(0);
    auto s1 = (*ds)->Sample(1);
    REQUIRE(s0.ok());
    REQUIRE(s1.ok());
    const Result<BlobInfo> c = s1->chunk(0, 3), base = s0->chunk(0, 0);
    REQUIRE(c.ok());
    REQUIRE(base.ok());
    const uint64_t first = base->codec == Codec::kRaw ? 64 : 16;
    off = static_cast<uint64_t>(c->data - base->data) + first;
  }  // closed
  const std::string path = fx.tmp / "shard-00000.sfs";
  Result<std::vector<uint8_t>> bytes = ReadWholeFile(path, 1 << 30);
  REQUIRE(bytes.ok());
  REQUIRE(off < bytes->size());
  (*bytes)[off] ^= 0x10;
  REQUIRE(WriteFileAtomic(path, bytes->data(), bytes->size(), false).ok());
  auto again = Dataset::Open(fx.tmp.path());
  REQUIRE(again.ok());
  auto v = (*again)->Sample(1);
  REQUIRE(v.ok());
  Decoder d;
  std::vector<uint8_t> out(*v->raw_size(0));
  const Status s = v->Decode(0, out.data(), out.size(), d);
  CHECK(s.code() == StatusCode::kCorruption);
  CHECK_THAT(s.message(), Catch::Contains("sample 1 field 'image' chunk 3: chunk checksum mismatch"));
  // A region that avoids the damaged chunk still reads.
  std::vector<uint8_t> corner(2 * 2 * 2 * 2);
  CHECK(v->DecodeRegion(0, {0, 0, 0}, {2, 2, 2}, corner.data(), corner.size(), d).ok());
}

TEST_CASE("format chunks: chunk shapes of the wrong rank are refused") {
  TempDir tmp;
  FieldSpec vol{"image", FieldKind::kNdarray, DType::kU16, {8, 8}, {}, {}};
  vol.chunk_shape = {4};
  CHECK_THAT(DatasetWriter::Create(tmp.path(), {vol}, {}).status().message(),
             Catch::Contains("does not have the rank"));
  vol.chunk_shape = {4, 0};
  CHECK_THAT(DatasetWriter::Create(tmp.path(), {vol}, {}).status().message(), Catch::Contains("dimension < 1"));
}

TEST_CASE("format chunks: chunk shapes follow the patch size and the size caps") {
  // 3D patches: a quarter of the patch per axis, channels one at a time.
  CHECK(ChooseChunkShape({1, 300, 512, 512}, {1, 128, 128, 128}, 2) == Shape{1, 32, 32, 32});
  // Never larger than the array; a chunk clipped to 20 slices (40 KiB) grows in-plane to the minimum.
  CHECK(ChooseChunkShape({1, 20, 512, 512}, {1, 128, 128, 128}, 2) == Shape{1, 20, 64, 32});
  // 2D patches: one whole slice per chunk, capped at 1.5x the patch in-plane.
  CHECK(ChooseChunkShape({1, 80, 256, 256}, {1, 1, 224, 224}, 2) == Shape{1, 1, 256, 256});
  CHECK(ChooseChunkShape({1, 80, 512, 512}, {1, 1, 224, 224}, 2) == Shape{1, 1, 336, 336});
  // At most 6 MiB: a 4096^2 f64 slice is halved until it fits.
  const Shape big = ChooseChunkShape({1, 4, 4096, 4096}, {1, 1, 4096, 4096}, 8);
  CHECK(big[2] * big[3] * 8 <= (6 << 20));
  CHECK(big[1] == 1);
}

TEST_CASE("format chunks: chunks of small 3D patches grow to the minimum size") {
  // A quarter of a 32x64x64 u16 patch is 8x16x16 (4 KiB); the smallest axis doubles until 64 KiB.
  const Shape small = ChooseChunkShape({1, 32, 512, 512}, {1, 32, 64, 64}, 2);
  CHECK(small == Shape{1, 32, 32, 32});
  CHECK(ShapeProduct(small) * 2 == ChunkPolicy{}.min_chunk_bytes);
  ChunkPolicy off;
  off.min_chunk_bytes = 0;
  CHECK(ChooseChunkShape({1, 32, 512, 512}, {1, 32, 64, 64}, 2, off) == Shape{1, 8, 16, 16});
  // 128^3 patches keep 32^3 chunks for u16 (64 KiB) and f32 (128 KiB); u8 grows the depth axis.
  CHECK(ChooseChunkShape({1, 300, 512, 512}, {1, 128, 128, 128}, 4) == Shape{1, 32, 32, 32});
  CHECK(ChooseChunkShape({1, 300, 512, 512}, {1, 128, 128, 128}, 1) == Shape{1, 64, 32, 32});
}

TEST_CASE("format chunks: growth stops at 1.5x the patch, the array and the byte cap") {
  // 1.5x an 8^3 patch is 12 per axis: 12^3 u8 stays under the minimum.
  CHECK(ChooseChunkShape({1, 100, 100, 100}, {1, 8, 8, 8}, 1) == Shape{1, 12, 12, 12});
  // A small array ends as one whole chunk per channel.
  CHECK(ChooseChunkShape({2, 8, 20, 20}, {1, 32, 64, 64}, 2) == Shape{1, 8, 20, 20});
  // A step that would pass max_chunk_bytes is not taken.
  ChunkPolicy p;
  p.min_chunk_bytes = 1 << 20;
  p.max_chunk_bytes = 256 << 10;
  const Shape capped = ChooseChunkShape({1, 300, 512, 512}, {1, 128, 128, 128}, 2, p);
  CHECK(capped == Shape{1, 64, 64, 32});
  CHECK(ShapeProduct(capped) * 2 <= p.max_chunk_bytes);
  // A cap below the minimum still wins: 32^3 u16 is halved to 32 KiB.
  p.min_chunk_bytes = 64 << 10;
  p.max_chunk_bytes = 32 << 10;
  CHECK(ChooseChunkShape({1, 300, 512, 512}, {1, 128, 128, 128}, 2, p) == Shape{1, 16, 32, 32});
}

TEST_CASE("format chunks: 2D slices stay one slice per chunk below the minimum") {
  // 64x64 u8 slices are 4 KiB, but a chunk never spans slices a 2D patch does not read.
  CHECK(ChooseChunkShape({1, 80, 64, 64}, {1, 1, 64, 64}, 1) == Shape{1, 1, 64, 64});
  CHECK(ChooseChunkShape({1, 100, 100}, {1, 64, 64}, 1) == Shape{1, 96, 96});
  CHECK(ChooseChunkShape({3, 20, 19}, {1, 8, 8}, 1) == Shape{1, 12, 12});
}
