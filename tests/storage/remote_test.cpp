// Remote datasets over HTTP: a real lighttpd on 127.0.0.1 serving datasets written by the
// tests, and servers that stall, cut bodies short or fail, to see each fault become an
// error that names the object, in bounded time, with nothing partial left in the cache.
#include "storage/remote.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "base/file.h"
#include "format/dataset.h"
#include "format/manifest.h"
#include "reader/loader.h"
#include "tests/common/temp_dir.h"
#include "tests/common/watchdog.h"
#include "tests/reader/reader_fixtures.h"
#include "tests/storage/served_dataset.h"
#include "tests/storage/servers.h"

namespace shardify {
namespace {

using testing::FixtureOptions;
using testing::Lighttpd;
using testing::MisbehavingServer;
using testing::Misbehaviour;
using testing::ServedDataset;
using testing::TempDir;

// The dataset the tests serve: 120 images in 8 to 12 shards.
constexpr uint64_t kRemoteSamples = 120;

// Every batch of a sequential pass over `location` (image, label), concatenated.
std::vector<uint8_t> ReadAll(const std::string& location, const storage::RemoteOptions& remote, size_t prefetch = 4) {
  LoaderOptions o;
  o.batch_size = 16;
  o.prefetch = prefetch;
  o.sampler.order = SampleOrder::kSequential;
  o.threads = 2;
  o.fields = {"image", "label"};
  o.remote = remote;
  auto loader = Loader::Open(location, o);
  REQUIRE(loader.ok());
  std::vector<uint8_t> all;
  while (true) {
    auto b = (*loader)->Next();
    INFO(b.status().ToString());
    REQUIRE(b.ok());
    if (!*b) break;
    for (const BatchField& f : (*b)->fields) {
      all.insert(all.end(), static_cast<const uint8_t*>(f.data), static_cast<const uint8_t*>(f.data) + f.bytes);
    }
  }
  return all;
}

// The complete files in the cache folders under `cache_dir`: how many, and their bytes.
struct Cached {
  size_t files = 0;
  uint64_t bytes = 0;
};
Cached CachedFiles(const std::string& cache_dir) {
  Cached c;
  const Result<std::vector<std::string>> folders = ListDir(cache_dir);
  REQUIRE(folders.ok());
  for (const std::string& folder : *folders) {
    const Result<std::vector<std::string>> names = ListDir(cache_dir + "/" + folder);
    REQUIRE(names.ok());
    for (const std::string& name : *names) {
      if (name[0] == '.' || name.find(".lock") != std::string::npos) continue;
      ++c.files;
      c.bytes += *FileSize(cache_dir + "/" + folder + "/" + name);
    }
  }
  return c;
}

storage::RemoteOptions Quick(const std::string& cache_dir) {
  storage::RemoteOptions r;
  r.cache_dir = cache_dir;
  r.transfer.stall_timeout_s = 1;
  r.transfer.attempts = 3;
  r.transfer.first_backoff_s = 0.05;
  return r;
}

TEST_CASE("storage: a dataset served over HTTP reads as the same batches as on disk", "[subprocess]") {
  ServedDataset served(kRemoteSamples);
  const TempDir& tmp = served.tmp;
  const Lighttpd& server = served.server;
  INFO(server.why());
  REQUIRE(server.started());
  const storage::RemoteOptions remote = Quick(tmp / "cache");
  const std::vector<uint8_t> local = ReadAll(tmp / "www/ds", remote);
  CHECK(ReadAll(server.url() + "/ds", remote) == local);
  const uint64_t cached = CachedFiles(tmp / "cache").bytes;
  CHECK(ReadAll(server.url() + "/ds/", remote) == local);  // again, from the cache
  CHECK(CachedFiles(tmp / "cache").bytes == cached);

  ReadOptions ro;
  ro.remote = remote;
  auto ds = Dataset::Open(server.url() + "/ds", ro);
  REQUIRE(ds.ok());
  CHECK((*ds)->dir() == server.url() + "/ds");
  CHECK((*ds)->num_samples() == 120);
}

TEST_CASE("storage: a cache smaller than the dataset stays within its limit", "[subprocess]") {
  ServedDataset served(kRemoteSamples);
  const TempDir& tmp = served.tmp;
  const Lighttpd& server = served.server;
  INFO(server.why());
  REQUIRE(server.started());
  auto local = Dataset::Open(tmp / "www/ds");
  REQUIRE(local.ok());
  uint64_t total = 0, largest = 0;
  for (const ShardInfo& s : (*local)->manifest().shards) {
    total += s.size_bytes;
    largest = std::max(largest, s.size_bytes);
  }
  REQUIRE((*local)->manifest().shards.size() >= 6);
  // Two batches of 16 in flight (prefetch 1) touch at most 6 shards of about 10 samples.
  storage::RemoteOptions remote = Quick(tmp / "cache");
  remote.cache_limit = 7 * largest;
  REQUIRE(remote.cache_limit < total);
  CHECK(ReadAll(server.url() + "/ds", remote, 1) == ReadAll(tmp / "www/ds", remote, 1));
  CHECK(CachedFiles(tmp / "cache").bytes <= remote.cache_limit);

  // Batches in flight (prefetch 4 + 1) wider than the cache: refused at open, saying what
  // would do (tests/storage/shared_cache_test.cpp reads through such caches).
  remote.cache_limit = 2 * largest;
  LoaderOptions wide;
  wide.batch_size = 16;
  wide.sampler.order = SampleOrder::kSequential;
  wide.remote = remote;
  const auto loader = Loader::Open(server.url() + "/ds", wide);
  REQUIRE(loader.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(loader.status().message(), Catch::Contains("the cache limit must be at least"));

  // A shuffled batch of 16 may touch 12 shards: refused at open, saying what to change.
  LoaderOptions shuffled = wide;
  shuffled.sampler.order = SampleOrder::kShuffle;
  const auto refused = Loader::Open(server.url() + "/ds", shuffled);
  REQUIRE(refused.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(refused.status().message(), Catch::Contains("shard_windowed"));
  shuffled.sampler.order = SampleOrder::kShardWindowed;
  shuffled.sampler.window_shards = 1;
  shuffled.batch_size = 4;
  shuffled.prefetch = 1;  // 8 samples in flight: at most 2 shards
  CHECK(Loader::Open(server.url() + "/ds", shuffled).ok());

  remote.cache_limit = largest - 1;
  ReadOptions ro;
  ro.remote = remote;
  const auto tiny = Dataset::Open(server.url() + "/ds", ro);
  REQUIRE(tiny.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(tiny.status().message(), Catch::Contains("smaller than the largest shard"));
}

TEST_CASE("storage: the Loader fetches shards ahead of the batches it has planned", "[subprocess]") {
  ServedDataset served(kRemoteSamples);
  const TempDir& tmp = served.tmp;
  const Lighttpd& server = served.server;
  INFO(server.why());
  REQUIRE(server.started());
  LoaderOptions o;
  o.batch_size = 8;  // about one shard a batch
  o.prefetch = 1;    // the ring plans two batches: two or three shards
  o.threads = 1;
  o.sampler.order = SampleOrder::kSequential;
  o.remote = Quick(tmp / "cache");
  auto loader = Loader::Open(server.url() + "/ds", o);
  REQUIRE(loader.ok());
  REQUIRE((*loader)->Next().ok());
  // The ring has planned at most batches 0 to 2 now (samples 0 to 23); the shards beyond
  // theirs come from the prefetcher.
  auto local = Dataset::Open(tmp / "www/ds");
  REQUIRE(local.ok());
  const size_t planned_shards = (*local)->ShardOfSample(23) + 1;
  size_t cached = 0;
  for (int i = 0; i < 100 && cached <= planned_shards; ++i) {  // up to 5 s
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    cached = CachedFiles(tmp / "cache").files;
  }
  CHECK(cached > planned_shards);
}

TEST_CASE("storage: a damaged or missing object is an error naming its URL, and never cached", "[subprocess]") {
  ServedDataset served(kRemoteSamples);
  const TempDir& tmp = served.tmp;
  const Lighttpd& server = served.server;
  INFO(server.why());
  REQUIRE(server.started());
  auto local = Dataset::Open(tmp / "www/ds");
  REQUIRE(local.ok());
  const ShardInfo first = (*local)->manifest().shards[0];
  const ShardInfo second = (*local)->manifest().shards[1];
  {  // flip a byte of the first shard's footer on the server
    std::fstream f(tmp / ("www/ds/" + first.file_name), std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-10, std::ios::end);
    const char c = static_cast<char>(f.get());
    f.seekp(-10, std::ios::end);
    f.put(static_cast<char>(c ^ 0x40));
  }
  REQUIRE(RemoveFile(tmp / ("www/ds/" + second.file_name)).ok());
  ReadOptions ro;
  ro.remote = Quick(tmp / "cache");
  auto ds = Dataset::Open(server.url() + "/ds", ro);
  REQUIRE(ds.ok());
  const auto damaged = (*ds)->Sample(first.first_sample);
  REQUIRE_FALSE(damaged.ok());
  CHECK(damaged.status().code() == StatusCode::kCorruption);
  CHECK_THAT(damaged.status().message(), Catch::Contains(server.url() + "/ds/" + first.file_name));
  const auto missing = (*ds)->Sample(second.first_sample);
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.status().message(), Catch::Contains(server.url() + "/ds/" + second.file_name));
  CHECK_THAT(missing.status().message(), Catch::Contains("404"));
  CHECK(CachedFiles(tmp / "cache").bytes == 0);
  CHECK((*ds)->Sample((*local)->manifest().shards[2].first_sample).ok());  // the others still read
}

TEST_CASE("storage: a stalled server is an error within the stall timeout, naming the object", "[subprocess]") {
  TempDir tmp;
  MisbehavingServer stall(Misbehaviour::kStall);
  ReadOptions ro;
  ro.remote = Quick(tmp / "cache");
  ro.remote.transfer.attempts = 2;
  const auto start = std::chrono::steady_clock::now();
  const auto opened = testing::WithinSeconds(30, "opening a dataset on a stalled server",
                                             [&] { return Dataset::Open(stall.url() + "/ds", ro); });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE_FALSE(opened.ok());
  CHECK(opened.status().code() == StatusCode::kIOError);
  CHECK_THAT(opened.status().message(), Catch::Contains(stall.url() + "/ds/manifest.sfm"));
  CHECK_THAT(opened.status().message(), Catch::Contains("after 2 attempts"));
  CHECK(stall.requests() == 2);
  CHECK(seconds < 10);
}

TEST_CASE("storage: cut bodies and server errors are retried, then reported", "[subprocess]") {
  TempDir tmp;
  ReadOptions ro;
  ro.remote = Quick(tmp / "cache");
  MisbehavingServer cut(Misbehaviour::kTruncate);
  const auto truncated = Dataset::Open(cut.url() + "/ds", ro);
  REQUIRE_FALSE(truncated.ok());
  CHECK(truncated.status().code() == StatusCode::kIOError);
  CHECK_THAT(truncated.status().message(), Catch::Contains("after 3 attempts"));
  CHECK(cut.requests() == 3);
  MisbehavingServer failing(Misbehaviour::kError503);
  const auto unavailable = Dataset::Open(failing.url() + "/ds", ro);
  REQUIRE_FALSE(unavailable.ok());
  CHECK_THAT(unavailable.status().message(), Catch::Contains("HTTP 503"));
  CHECK(failing.requests() == 3);
}

// The image of sample i of `ds`, decoded.
std::vector<uint8_t> Image(const Dataset& ds, uint64_t i) {
  Decoder decoder;
  auto v = ds.Sample(i);
  INFO(v.status().ToString());
  REQUIRE(v.ok());
  const size_t field = static_cast<size_t>(ds.manifest().FindField("image"));
  std::vector<uint8_t> out(*v->raw_size(field));
  const Status st = v->Decode(field, out.data(), out.size(), decoder);
  INFO(st.ToString());
  REQUIRE(st.ok());
  return out;
}

TEST_CASE("storage: samples of a dataset larger than the cache are read by ranges, batches fetch whole shards",
          "[subprocess]") {
  ServedDataset served(kRemoteSamples);
  const TempDir& tmp = served.tmp;
  INFO(served.server.why());
  REQUIRE(served.server.started());
  auto local = Dataset::Open(tmp / "www/ds", ReadOptions());
  REQUIRE(local.ok());
  ReadOptions ro;
  ro.remote = Quick(tmp / "cache");
  ro.remote.cache_limit = 8000;  // two or so of the dataset's 8-12 shards
  auto ds = Dataset::Open(served.server.url() + "/ds", ro);
  REQUIRE(ds.ok());
  REQUIRE((*ds)->remote()->ranges());
  for (uint64_t i : {0, 57, 119, 58, 1}) {
    INFO("sample " << i);
    CHECK(Image(**ds, i) == Image(**local, i));
  }
  CHECK(CachedFiles(tmp / "cache").files == 0);  // read by ranges: nothing fetched whole
  // A batch (the Loader's way) fetches its shard whole, and a sample read after it is
  // read from that copy.
  const uint64_t batch[] = {0, 1, 2};
  std::vector<SampleView> views(3);
  std::vector<std::shared_ptr<const void>> pins;
  REQUIRE((*ds)->SampleBatch(batch, 3, views.data(), &pins).ok());
  CHECK(CachedFiles(tmp / "cache").files == 1);
  CHECK(Image(**ds, 2) == Image(**local, 2));

  ro.remote.fetch = storage::RemoteFetch::kWhole;  // the choice made explicit
  ro.remote.cache_dir = tmp / "cache2";
  auto whole = Dataset::Open(served.server.url() + "/ds", ro);
  REQUIRE(whole.ok());
  CHECK_FALSE((*whole)->remote()->ranges());
  CHECK(Image(**whole, 119) == Image(**local, 119));
  CHECK(CachedFiles(tmp / "cache2").files == 1);
}

TEST_CASE("storage: a server that ignores ranges is an error naming the object", "[subprocess]") {
  TempDir tmp;
  Lighttpd server(ServedDataset::Written(tmp, kRemoteSamples), tmp.path(), "server.range-requests = \"disable\"\n");
  INFO(server.why());
  REQUIRE(server.started());
  ReadOptions ro;
  ro.remote = Quick(tmp / "cache");
  ro.remote.fetch = storage::RemoteFetch::kRanges;
  auto ds = Dataset::Open(server.url() + "/ds", ro);
  REQUIRE(ds.ok());
  const auto v = (*ds)->Sample(5);
  REQUIRE_FALSE(v.ok());
  CHECK(v.status().code() == StatusCode::kIOError);
  CHECK_THAT(v.status().message(), Catch::Contains(server.url() + "/ds/shard-0000"));
  CHECK_THAT(v.status().message(), Catch::Contains("range"));
}

TEST_CASE("storage: a URL's query goes with every request and stays out of errors", "[subprocess]") {
  TempDir tmp;
  // lighttpd refuses every request without the token.
  Lighttpd server(ServedDataset::Written(tmp, kRemoteSamples), tmp.path(),
                  "server.modules += (\"mod_access\")\n"
                  "$HTTP[\"querystring\"] != \"sig=s3cr3t\" { url.access-deny = (\"\") }\n");
  INFO(server.why());
  REQUIRE(server.started());
  const storage::RemoteOptions remote = Quick(tmp / "cache");
  CHECK(ReadAll(server.url() + "/ds?sig=s3cr3t", remote) == ReadAll(tmp / "www/ds", remote));
  ReadOptions ro;
  ro.remote = remote;
  const auto refused = Dataset::Open(server.url() + "/ds?sig=wrong", ro);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.status().message(), Catch::Contains(server.url() + "/ds/manifest.sfm?...: access refused"));
  CHECK_THAT(refused.status().message(), !Catch::Contains("wrong"));
  const auto missing = Dataset::Open(server.url() + "/nothing?sig=s3cr3t", ro);
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.status().message(), !Catch::Contains("s3cr3t"));
}

TEST_CASE("storage: shards named with '?', '#', '%' and spaces read over HTTP as on disk", "[subprocess]") {
  TempDir tmp;
  const std::string ds = ServedDataset::Written(tmp, kRemoteSamples) + "/ds";
  const std::string manifest = ds + "/" + kManifestFileName;
  const Result<std::vector<uint8_t>> bytes = ReadWholeFile(manifest, 1 << 24);
  REQUIRE(bytes.ok());
  Result<Manifest> m = DecodeManifestFile(bytes->data(), bytes->size(), manifest);
  REQUIRE(m.ok());
  for (size_t i = 0; i < m->shards.size(); ++i) {
    const std::string name = "shard " + std::to_string(i) + "?v=1#x %41.sfs";
    REQUIRE(RenameFile(ds + "/" + m->shards[i].file_name, ds + "/" + name).ok());
    m->shards[i].file_name = name;
  }
  const std::vector<uint8_t> renamed = EncodeManifestFile(*m);
  REQUIRE(WriteFileAtomic(manifest, renamed.data(), renamed.size(), false).ok());
  Lighttpd server(tmp / "www", tmp.path());
  INFO(server.why());
  REQUIRE(server.started());
  const storage::RemoteOptions remote = Quick(tmp / "cache");
  CHECK(ReadAll(server.url() + "/ds", remote) == ReadAll(ds, remote));
  ReadOptions ro;
  ro.remote = Quick(tmp / "cache-ranges");
  ro.remote.fetch = storage::RemoteFetch::kRanges;  // a sample by range requests
  const auto opened = Dataset::Open(server.url() + "/ds", ro);
  REQUIRE(opened.ok());
  const auto sample = (*opened)->Sample(7);
  INFO(sample.status().ToString());
  CHECK(sample.ok());
}

TEST_CASE("storage: an https server is checked against the CA bundle given, or the system's", "[subprocess]") {
  TempDir tmp;
  const std::string www = ServedDataset::Written(tmp, kRemoteSamples);
  // A key and a self-signed certificate for 127.0.0.1, made by openssl.
  const std::string make =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 -addext "
      "subjectAltName=IP:127.0.0.1 -keyout " +
      (tmp / "key.pem") + " -out " + (tmp / "cert.pem") + " >/dev/null 2>&1";
  REQUIRE(std::system(make.c_str()) == 0);
  Lighttpd server(www, tmp.path(),
                  "server.modules += (\"mod_openssl\")\nssl.engine = \"enable\"\nssl.pemfile = \"" +
                      (tmp / "cert.pem") + "\"\nssl.privkey = \"" + (tmp / "key.pem") + "\"\n");
  INFO(server.why());
  REQUIRE(server.started());
  const std::string url = "https" + server.url().substr(4) + "/ds";
  storage::RemoteOptions trusting = Quick(tmp / "cache");
  trusting.transfer.ca_bundle = tmp / "cert.pem";
  CHECK(ReadAll(url, trusting) == ReadAll(tmp / "www/ds", trusting));

  ReadOptions ro;
  ro.remote = Quick(tmp / "cache");
  const auto untrusted = Dataset::Open(url, ro);  // the system's CAs do not know this one
  REQUIRE_FALSE(untrusted.ok());
  CHECK_THAT(untrusted.status().message(), Catch::Contains(url + "/manifest.sfm"));
  CHECK_THAT(untrusted.status().message(), Catch::Contains("certificate"));
  ro.remote.transfer.ca_bundle = tmp / "nothing.pem";
  const auto missing = Dataset::Open(url, ro);
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.status().message(), Catch::Contains("nothing.pem': no such file"));
}

}  // namespace
}  // namespace shardify
