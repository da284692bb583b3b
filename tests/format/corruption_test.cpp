// One test per defect class: each asserts the error code and a message substring.
#include <catch2/catch.hpp>
#include <cstring>

#include "base/checksum.h"
#include "base/file.h"
#include "fixtures.h"
#include "format/codec_internal.h"
#include "format/dataset.h"
#include "format/shard_index_internal.h"
#include "tests/common/temp_dir.h"

using namespace shardify;
using namespace shardify::testing;

namespace {

using Bytes = std::vector<uint8_t>;

uint64_t FirstBlobOffset(const Dataset& ds);

struct Fixture {
  TempDir tmp;
  std::string dir = tmp.path();
  std::string shard = tmp / "shard-00000.sfs";
  Fixture() { REQUIRE(WriteSmallDataset(dir, 20, 1 << 20).ok()); }
  Bytes Read() const { return *ReadWholeFile(shard, 1 << 30); }
  void Write(const Bytes& b) const { REQUIRE(WriteFileAtomic(shard, b.data(), b.size(), false).ok()); }
  ShardFooter Footer(const Bytes& b) const { return DecodeShardFooter(b.data() + b.size() - kShardFooterSize); }
  // Rewrites the manifest so that it agrees with the shard as it now is: a hostile but
  // self-consistent dataset, which must still be caught by the shard's own checks.
  void Rebless() const {
    Bytes mb = *ReadWholeFile(tmp / kManifestFileName, 1 << 30);
    Manifest m = *DecodeManifestFile(mb.data(), mb.size(), "m");
    const Bytes b = Read();
    m.shards[0].size_bytes = b.size();
    if (b.size() >= kShardFooterSize) m.shards[0].index_checksum = Footer(b).index_checksum;
    const Bytes out = EncodeManifestFile(m);
    REQUIRE(WriteFileAtomic(tmp / kManifestFileName, out.data(), out.size(), false).ok());
  }
  // Replaces the index (and fixes up footer, its checksum and the manifest).
  void ReplaceIndex(const Bytes& index, uint32_t version = 1, uint32_t flags = 0) const {
    Bytes b = Read();
    ShardFooter f = Footer(b);
    b.resize(f.index_offset);
    b.insert(b.end(), index.begin(), index.end());
    f.index_length = index.size();
    f.index_checksum = Checksum64(index.data(), index.size());
    f.version = version;
    f.flags = flags;
    PutU32(b.data() + 8, version);
    PutU32(b.data() + 12, flags);
    uint8_t fb[kShardFooterSize];
    EncodeShardFooter(f, b.data(), fb);
    b.insert(b.end(), fb, fb + kShardFooterSize);
    Write(b);
    Rebless();
  }
  Bytes Index() const {
    const Bytes b = Read();
    const ShardFooter f = Footer(b);
    return Bytes(b.begin() + f.index_offset, b.begin() + f.index_offset + f.index_length);
  }
  // An index for the fixture's 20 samples whose sample `bad` has blob `e` and shape `shape`.
  Bytes HostileIndex(uint64_t bad, detail::BlobEntry e, Shape shape, std::vector<FieldSpec>* fields) const {
    auto ds = Dataset::Open(dir);
    REQUIRE(ds.ok());
    *fields = (*ds)->manifest().fields;
    detail::ShardIndexBuilder builder(fields);
    builder.Reset(0);
    for (uint64_t i = 0; i < 20; ++i) {
      auto v = (*ds)->Sample(i);
      REQUIRE(v.ok());
      const BlobInfo bi = *v->blob(0);
      detail::BlobEntry entry{static_cast<uint64_t>(bi.data - (*ds)->Sample(0)->blob(0)->data) + FirstBlobOffset(**ds),
                              bi.stored_size, bi.raw_size, bi.checksum, bi.codec};
      builder.AddBlob(0, i == bad ? e : entry, i == bad ? shape : *v->shape(0));
      builder.AddInt(1, *v->int_value(1));
      builder.AddData(2, std::string(*v->bytes_value(2)));
      builder.EndSample();
    }
    return builder.Finish();
  }
};

// File offset of the first blob: right after the header, or aligned when stored raw.
uint64_t FirstBlobOffset(const Dataset& ds) {
  return ds.Sample(0)->blob(0)->codec == Codec::kRaw ? kBlobAlignment : kShardHeaderSize;
}

Status OpenAndReadAll(const std::string& dir, ReadOptions ro = {}) {
  ASSIGN_OR_RETURN(auto ds, Dataset::Open(dir, ro));
  Decoder d;
  std::vector<uint8_t> buf;
  for (uint64_t i = 0; i < ds->num_samples(); ++i) {
    ASSIGN_OR_RETURN(SampleView v, ds->Sample(i));
    ASSIGN_OR_RETURN(BlobInfo b, v.blob(0));
    buf.resize(b.raw_size);
    RETURN_IF_ERROR(v.Decode(0, buf.data(), buf.size(), d));
  }
  return Status::Ok();
}

void ExpectError(const Status& s, StatusCode code, const std::string& text) {
  INFO(s.ToString());
  CHECK(s.code() == code);
  CHECK_THAT(s.message(), Catch::Contains(text));
}

}  // namespace

TEST_CASE("format corruption: not a dataset") {
  TempDir tmp;
  ExpectError(Dataset::Open(tmp.path()).status(), StatusCode::kNotFound, "not a shardify dataset");
  ExpectError(Dataset::Open(tmp / "nope").status(), StatusCode::kNotFound, "no such directory");
  Bytes junk = {'h', 'e', 'l', 'l', 'o'};
  REQUIRE(WriteFileAtomic(tmp / kManifestFileName, junk.data(), junk.size(), false).ok());
  ExpectError(Dataset::Open(tmp.path()).status(), StatusCode::kCorruption, "too small for a manifest");
}

TEST_CASE("format corruption: missing shard") {
  Fixture fx;
  REQUIRE(RemoveFile(fx.shard).ok());
  ExpectError(OpenAndReadAll(fx.dir), StatusCode::kCorruption, "shard-00000.sfs: shard is missing");
}

TEST_CASE("format corruption: shard of the wrong size") {
  Fixture fx;
  Bytes b = fx.Read();
  b.push_back(0);
  fx.Write(b);
  ExpectError(OpenAndReadAll(fx.dir), StatusCode::kCorruption, "manifest says");
}

TEST_CASE("format corruption: bad magic at either end") {
  Fixture fx;
  Bytes b = fx.Read();
  b[1] = 'X';
  fx.Write(b);
  ExpectError(OpenAndReadAll(fx.dir), StatusCode::kCorruption, "bad head magic");
  b[1] = 'S';
  b[b.size() - 2] = 'X';
  fx.Write(b);
  ExpectError(OpenAndReadAll(fx.dir), StatusCode::kCorruption, "bad tail magic");
}

TEST_CASE("format corruption: truncation at every structural boundary") {
  Fixture fx;
  const Bytes good = fx.Read();
  const ShardFooter f = fx.Footer(good);
  const uint64_t cuts[] = {0,
                           8,
                           15,
                           16,
                           64,
                           f.index_offset,
                           f.index_offset + 1,
                           f.index_offset + f.index_length,
                           good.size() - 8,
                           good.size() - 1};
  for (uint64_t cut : cuts) {
    INFO("cut at " << cut);
    fx.Write(Bytes(good.begin(), good.begin() + cut));
    ExpectError(OpenAndReadAll(fx.dir), StatusCode::kCorruption, "shard-00000.sfs");  // manifest size
    fx.Rebless();                                                                     // hostile manifest
    CHECK(OpenAndReadAll(fx.dir).code() == StatusCode::kCorruption);
  }
}

TEST_CASE("format corruption: a flipped byte in each region") {
  Fixture fx;
  const Bytes good = fx.Read();
  const ShardFooter f = fx.Footer(good);
  struct Case {
    uint64_t at;
    const char* text;
  } cases[] = {{9, "footer checksum mismatch"},     // header version
               {64 + 3, "blob checksum mismatch"},  // first blob
               {f.index_offset + f.index_length / 2, "index checksum mismatch"},
               {good.size() - 20, "footer checksum mismatch"}};  // footer checksum field
  for (const Case& c : cases) {
    INFO("byte " << c.at);
    Bytes b = good;
    b[c.at] ^= 0x01;
    fx.Write(b);
    ExpectError(OpenAndReadAll(fx.dir), StatusCode::kCorruption, c.text);
  }
}

TEST_CASE("format corruption: the blob error names file, sample and field") {
  Fixture fx;
  Bytes b = fx.Read();
  auto ds = Dataset::Open(fx.dir);
  const BlobInfo bi = *(*ds)->Sample(7)->blob(0);
  const uint64_t off = static_cast<uint64_t>(bi.data - (*ds)->Sample(0)->blob(0)->data) + FirstBlobOffset(**ds);
  ds = Status(Internal("closed"));
  b[off] ^= 0xff;
  fx.Write(b);
  ExpectError(OpenAndReadAll(fx.dir), StatusCode::kCorruption, "shard-00000.sfs sample 7 field 'image'");
  ExpectError(OpenAndReadAll(fx.dir), StatusCode::kCorruption, "checksum mismatch: expected 0x");
  ReadOptions ro;
  ro.verify_checksums = false;  // without checksums, zstd itself or the size check catches it
  const Status s = OpenAndReadAll(fx.dir, ro);
  if (!s.ok()) ExpectError(s, StatusCode::kCorruption, "sample 7");
}

TEST_CASE("format corruption: index that fails the FlatBuffers verifier") {
  Fixture fx;
  Bytes index = fx.Index();
  PutU32(index.data(), 0x7fffff00);  // root offset far outside the buffer
  fx.ReplaceIndex(index);
  ExpectError(OpenAndReadAll(fx.dir), StatusCode::kCorruption, "fails the FlatBuffers verifier");
  Bytes junk(64, 0xAB);
  fx.ReplaceIndex(junk);
  ExpectError(OpenAndReadAll(fx.dir), StatusCode::kCorruption, "fails the FlatBuffers verifier");
  for (size_t n : {0, 4, 7}) {  // shorter than a root offset and an identifier: refused before reading them
    fx.ReplaceIndex(Bytes(n, 0));
    ExpectError(OpenAndReadAll(fx.dir), StatusCode::kCorruption, "is too short for a FlatBuffer");
  }
}

TEST_CASE("format corruption: version too new") {
  Fixture fx;
  const std::string too_new = "format version " + std::to_string(kFormatVersion + 1) + " is not supported";
  fx.ReplaceIndex(fx.Index(), kFormatVersion + 1);
  ExpectError(OpenAndReadAll(fx.dir), StatusCode::kUnsupported, too_new);
  Manifest m;
  m.format_version = kFormatVersion + 1;
  const Bytes mb = EncodeManifestFile(m);
  ExpectError(DecodeManifestFile(mb.data(), mb.size(), "m").status(), StatusCode::kUnsupported, too_new);
  // A known version that disagrees with the manifest's is corruption.
  fx.ReplaceIndex(fx.Index(), 2);
  ExpectError(OpenAndReadAll(fx.dir), StatusCode::kCorruption, "shard is version 2, the manifest version 1");
}

TEST_CASE("format corruption: reserved flag bit set") {
  Fixture fx;
  fx.ReplaceIndex(fx.Index(), 1, 0x4);
  ExpectError(OpenAndReadAll(fx.dir), StatusCode::kUnsupported, "reserved flag bits set");
}

TEST_CASE("format corruption: lengths and offsets that overflow or leave the file") {
  Fixture fx;
  std::vector<FieldSpec> fields;
  const Bytes good = fx.Read();
  struct Case {
    detail::BlobEntry blob;
    const char* text;
  } cases[] = {{{~0ull - 63, 128, 64, 0, Codec::kZstd}, "outside the data region"},
               {{64, ~0ull - 10, 64, 0, Codec::kZstd}, "outside the data region"},
               {{65, 64, 64, 0, Codec::kRaw}, "misaligned"},
               {{64, 10, 64, 0, static_cast<Codec>(9)}, "unknown codec 9"},
               {{64, 10, 63, 0, Codec::kZstd}, "disagrees with shape"},
               {{64, 10, 64, 0, Codec::kRaw}, "raw blob stores 10 bytes"},
               {{64, 10, 64, 0, Codec::kZstdDict}, "has none"}};
  for (const Case& c : cases) {
    INFO(c.text);
    fx.Write(good);
    fx.Rebless();
    fx.ReplaceIndex(fx.HostileIndex(3, c.blob, {1, 8, 8}, &fields));
    ExpectError(OpenAndReadAll(fx.dir), StatusCode::kCorruption, c.text);
    ExpectError(OpenAndReadAll(fx.dir), StatusCode::kCorruption, "shard-00000.sfs sample 3 field 'image'");
  }
}

TEST_CASE("format corruption: shapes that overflow") {
  TempDir tmp;
  std::vector<FieldSpec> fields = {{"image", FieldKind::kNdarray, DType::kU8, {-1, -1}, {}, {}},
                                   {"label", FieldKind::kInt, DType::kU8, {}, {}, {}},
                                   {"path", FieldKind::kString, DType::kU8, {}, {}, {}}};
  WriterOptions o;
  o.fsync = false;
  auto w = DatasetWriter::Create(tmp.path(), fields, o);
  for (int i = 0; i < 4; ++i) {
    SampleInput s;
    s.values = {FieldValue::Array(Pattern(64, i), {8, 8}), FieldValue::Int(i), FieldValue::String("p")};
    REQUIRE((*w)->Append(std::move(s)).ok());
  }
  REQUIRE((*w)->Finish().ok());
  detail::ShardIndexBuilder builder(&fields);
  builder.Reset(0);
  for (int i = 0; i < 4; ++i) {
    builder.AddBlob(0, {64, 10, 64, 0, Codec::kZstd}, i == 2 ? Shape{1ll << 40, 1ll << 40} : Shape{8, 8});
    builder.AddInt(1, i);
    builder.AddData(2, "p");
    builder.EndSample();
  }
  Bytes b = *ReadWholeFile(tmp / "shard-00000.sfs", 1 << 30);
  ShardFooter f = DecodeShardFooter(b.data() + b.size() - kShardFooterSize);
  const Bytes index = builder.Finish();
  b.resize(f.index_offset);
  b.insert(b.end(), index.begin(), index.end());
  f.index_length = index.size();
  f.index_checksum = Checksum64(index.data(), index.size());
  uint8_t fb[kShardFooterSize];
  EncodeShardFooter(f, b.data(), fb);
  b.insert(b.end(), fb, fb + kShardFooterSize);
  REQUIRE(WriteFileAtomic(tmp / "shard-00000.sfs", b.data(), b.size(), false).ok());
  Bytes mb = *ReadWholeFile(tmp / kManifestFileName, 1 << 30);
  Manifest m = *DecodeManifestFile(mb.data(), mb.size(), "m");
  m.shards[0].size_bytes = b.size();
  m.shards[0].index_checksum = f.index_checksum;
  mb = EncodeManifestFile(m);
  REQUIRE(WriteFileAtomic(tmp / kManifestFileName, mb.data(), mb.size(), false).ok());
  ExpectError(OpenAndReadAll(tmp.path()), StatusCode::kCorruption, "overflows");
}

TEST_CASE("format corruption: decompression bomb") {
  // A raw size far beyond the configured limit is refused before anything is allocated.
  Fixture fx;
  ReadOptions ro;
  ro.max_sample_bytes = 32;
  ExpectError(OpenAndReadAll(fx.dir, ro), StatusCode::kCorruption, "exceeds the limit of 32");
  // A frame that expands past its declared raw size is stopped at the destination's end.
  Bytes big(1 << 20, 7);
  detail::CodecContext ctx;
  Bytes frame;
  REQUIRE(detail::EncodeBlob(Codec::kZstd, ctx, big.data(), big.size(), nullptr, 3, 0.95, &frame).ok());
  Bytes dst(64);
  ExpectError(detail::DecodeBlob(Codec::kZstd, frame.data(), frame.size(), 64, dst.data(), &ctx, nullptr),
              StatusCode::kCorruption, "frame declares 1048576 bytes, expected 64");
}

TEST_CASE("format: a decoder without a codec context fails with ResourceExhausted, not a crash") {
  Bytes raw(4096, 3);
  detail::CodecContext ctx;
  Bytes frame;
  REQUIRE(detail::EncodeBlob(Codec::kZstd, ctx, raw.data(), raw.size(), nullptr, 3, 0.95, &frame).ok());
  Bytes dst(raw.size());
  ExpectError(detail::DecodeBlob(Codec::kZstd, frame.data(), frame.size(), raw.size(), dst.data(), nullptr, nullptr),
              StatusCode::kResourceExhausted, "no codec context");
  // the usual case: a context
  REQUIRE(detail::DecodeBlob(Codec::kZstd, frame.data(), frame.size(), raw.size(), dst.data(), &ctx, nullptr).ok());
  CHECK(dst == raw);
}
