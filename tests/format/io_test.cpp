// Reading with pread and through mappings, raw and zstd blobs, and shards that change
// while they are open.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <string>
#include <vector>

#include "base/file.h"
#include "format/dataset.h"
#include "format/writer.h"
#include "tests/common/temp_dir.h"
#include "tests/format/fixtures.h"

using namespace shardify;
using testing::TempDir;

namespace {

using Bytes = std::vector<uint8_t>;

std::unique_ptr<Dataset> OpenWith(const std::string& dir, IoMode io) {
  ReadOptions o;
  o.io = io;
  auto ds = Dataset::Open(dir, o);
  REQUIRE(ds.ok());
  return std::move(ds).value();
}

// Every ndarray field of every sample, decoded.
std::vector<Bytes> DecodeAll(const Dataset& ds) {
  std::vector<Bytes> out;
  Decoder d;
  for (uint64_t i = 0; i < ds.num_samples(); ++i) {
    auto v = ds.Sample(i);
    REQUIRE(v.ok());
    for (size_t f = 0; f < ds.manifest().fields.size(); ++f) {
      if (ds.manifest().fields[f].kind != FieldKind::kNdarray) continue;
      auto raw = v->raw_size(f);
      REQUIRE(raw.ok());
      out.emplace_back(*raw);
      const Status s = v->Decode(f, out.back().data(), out.back().size(), d);
      INFO(s.ToString());
      REQUIRE(s.ok());
    }
  }
  return out;
}

// 64 samples of 64x64 bytes, one shard of about 260 KiB (many pages).
void WriteImages(const std::string& dir, Codec codec) {
  WriterOptions o;
  o.codec = codec;
  REQUIRE(testing::WriteSmallDataset(dir, 64, 1 << 30, o, {1, 64, 64}).ok());
}

void Truncate(const std::string& path, uint64_t size) {
  REQUIRE(::truncate(path.c_str(), static_cast<off_t>(size)) == 0);
}

}  // namespace

TEST_CASE("io: pread and mmap give the same bytes on every golden dataset") {
  for (const char* name : {"golden-v1", "golden-v2", "golden-v3", "golden-v4"}) {
    const std::string dir = std::string(SHARDIFY_TEST_DATA_DIR) + "/" + name;
    INFO(dir);
    const std::vector<Bytes> mapped = DecodeAll(*OpenWith(dir, IoMode::kMmap));
    CHECK(DecodeAll(*OpenWith(dir, IoMode::kPread)) == mapped);
    CHECK_FALSE(mapped.empty());
  }
  CHECK(ParseIoMode("pread") == IoMode::kPread);
  CHECK(ParseIoMode("mmap") == IoMode::kMmap);
  CHECK_FALSE(ParseIoMode("mmap2"));
  CHECK(std::string(IoModeName(IoMode::kPread)) == "pread");
}

TEST_CASE("io: a raw dataset stores aligned uncompressed blobs and decodes like zstd") {
  TempDir tmp;
  WriteImages(tmp / "raw", Codec::kRaw);
  WriteImages(tmp / "zstd", Codec::kZstd);
  auto raw = OpenWith(tmp / "raw", IoMode::kMmap);
  for (uint64_t i = 0; i < raw->num_samples(); ++i) {
    const BlobInfo b = *raw->Sample(i)->blob(0);
    CHECK(b.codec == Codec::kRaw);
    CHECK(b.offset % kBlobAlignment == 0);
    CHECK(b.stored_size == 64 * 64);
    CHECK(b.data != nullptr);
  }
  CHECK(OpenWith(tmp / "zstd", IoMode::kMmap)->Sample(0)->blob(0)->codec == Codec::kZstd);
  const std::vector<Bytes> expected = DecodeAll(*OpenWith(tmp / "zstd", IoMode::kMmap));
  CHECK(DecodeAll(*raw) == expected);
  CHECK(DecodeAll(*OpenWith(tmp / "raw", IoMode::kPread)) == expected);
  CHECK(OpenWith(tmp / "raw", IoMode::kPread)->Sample(0)->blob(0)->data == nullptr);  // no mapping to point into

  WriterOptions o;
  o.codec = Codec::kRaw;
  auto w = DatasetWriter::Create(tmp / "dict", testing::ImageLabelFields(), o);
  REQUIRE(w.ok());
  CHECK((*w)->TrainDictionary("image", {Bytes(64, 1)}).code() == StatusCode::kInvalidArgument);
  o.codec = Codec::kZstdDict;
  CHECK(DatasetWriter::Create(tmp / "dict2", testing::ImageLabelFields(), o).status().code() ==
        StatusCode::kInvalidArgument);
}

TEST_CASE("io: a shard truncated while open gives an io error naming it, then corruption on reopening") {
  for (IoMode io : {IoMode::kMmap, IoMode::kPread}) {
    for (Codec codec : {Codec::kRaw, Codec::kZstd}) {
      TempDir tmp;
      WriteImages(tmp / "ds", codec);
      auto ds = OpenWith(tmp / "ds", io);
      const std::string shard = tmp / "ds/shard-00000.sfs";
      Decoder d;
      Bytes out(64 * 64);
      auto last = ds->Sample(63);  // opens the shard
      REQUIRE(last.ok());
      REQUIRE(last->Decode(0, out.data(), out.size(), d).ok());
      Truncate(shard, 8192);  // whole pages past the end: a mapped read of them faults
      INFO(IoModeName(io) << " " << (codec == Codec::kRaw ? "raw" : "zstd"));
      const Status s = last->Decode(0, out.data(), out.size(), d);
      CHECK(s.code() == StatusCode::kIOError);
      CHECK_THAT(s.message(), Catch::Contains("shard-00000.sfs") && Catch::Contains("sample 63"));
      // The Dataset closed the shard: the next access opens it again and finds it short.
      auto again = ds->Sample(63);
      REQUIRE_FALSE(again.ok());
      CHECK(again.status().code() == StatusCode::kCorruption);
      CHECK_THAT(again.status().message(), Catch::Contains("shard-00000.sfs") && Catch::Contains("manifest says"));
    }
  }
}

TEST_CASE("io: bytes rewritten in place after opening fail their checksum in both modes") {
  for (IoMode io : {IoMode::kMmap, IoMode::kPread}) {
    TempDir tmp;
    WriteImages(tmp / "ds", Codec::kRaw);
    auto ds = OpenWith(tmp / "ds", io);
    auto v = ds->Sample(5);
    REQUIRE(v.ok());
    const BlobInfo b = *v->blob(0);
    Decoder d;
    Bytes out(64 * 64);
    REQUIRE(v->Decode(0, out.data(), out.size(), d).ok());
    const int fd = ::open((tmp / "ds/shard-00000.sfs").c_str(), O_WRONLY);
    REQUIRE(fd >= 0);
    const uint8_t flipped = static_cast<uint8_t>(out[100] ^ 0x5a);
    REQUIRE(::pwrite(fd, &flipped, 1, static_cast<off_t>(b.offset + 100)) == 1);
    ::close(fd);
    const Status s = v->Decode(0, out.data(), out.size(), d);
    CHECK(s.code() == StatusCode::kCorruption);
    CHECK_THAT(s.message(), Catch::Contains("shard-00000.sfs sample 5") && Catch::Contains("checksum mismatch"));
  }
}

TEST_CASE("io: a SIGBUS outside any shard still ends the process") {
  TempDir tmp;
  WriteImages(tmp / "ds", Codec::kRaw);
  OpenWith(tmp / "ds", IoMode::kMmap)->Sample(0).status().IgnoreError();  // installs the handler
  const std::string path = tmp / "other";
  {
    auto f = WritableFile::Create(path);
    REQUIRE(f.ok());
    REQUIRE((*f)->AppendZeros(3 * 4096).ok());
    REQUIRE((*f)->Close().ok());
  }
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {  // maps a file of its own, truncates it and reads past the end
    const int fd = ::open(path.c_str(), O_RDWR);
    void* p = ::mmap(nullptr, 3 * 4096, PROT_READ, MAP_SHARED, fd, 0);
    if (fd < 0 || p == MAP_FAILED || ::ftruncate(fd, 0) != 0) ::_exit(3);
    const volatile uint8_t* bytes = static_cast<const uint8_t*>(p);
    ::_exit(bytes[2 * 4096] == 0 ? 0 : 4);  // exits 0 only if the read came back
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  INFO("status " << status);
  // Killed by SIGBUS; under AddressSanitizer, whose handler came before ours, ended by its
  // report (an abort with abort_on_error, else an exit).
#if defined(__SANITIZE_ADDRESS__)
  constexpr bool kSanitizer = true;
#else
  constexpr bool kSanitizer = false;
#endif
  CHECK((WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != 3)));
  if (WIFSIGNALED(status)) CHECK((WTERMSIG(status) == SIGBUS || (kSanitizer && WTERMSIG(status) == SIGABRT)));
}
