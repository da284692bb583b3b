// loader_bench: how fast the Loader streams a dataset's batches, and (--bare-zstd) the
// ceiling for it: the same stored image blobs through zstd alone.
#include <zstd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/parallel.h"
#include "format/dataset.h"
#include "reader/bench.h"

namespace {
using shardify::LoaderBenchResult;
using shardify::Result;
using shardify::Status;

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One line of JSON with every member of `r` and the derived rates.
std::string ToJson(const LoaderBenchResult& r) {
  char line[512];
  std::snprintf(line, sizeof(line),
                "{\"samples\": %llu, \"batches\": %llu, \"bytes\": %llu, \"open_seconds\": %.6f, "
                "\"first_batch_seconds\": %.6f, \"seconds\": %.6f, \"samples_per_second\": %.1f, "
                "\"mb_per_second\": %.2f, \"ring_bytes\": %zu}",
                static_cast<unsigned long long>(r.samples), static_cast<unsigned long long>(r.batches),
                static_cast<unsigned long long>(r.bytes), r.open_seconds, r.first_batch_seconds, r.seconds,
                r.samples_per_second(), r.megabytes_per_second(), r.ring_bytes);
  return line;
}

// One sample's stored blob: its bytes in the shard's mapping (valid while `views` live).
struct Stored {
  const uint8_t* data;
  size_t size;
  shardify::Codec codec;
};

const char* CodecLabel(shardify::Codec c) {
  switch (c) {
    case shardify::Codec::kRaw:
      return "raw (memcpy)";
    case shardify::Codec::kZstd:
      return "zstd";
    case shardify::Codec::kZstdDict:
      return "zstd with the dictionary";
  }
  return "?";
}

// Samples per work item of the bare decode: enough that handing out items costs nothing.
constexpr size_t kBlock = 256;

// The stored blobs of the first ndarray field (not chunked) of `split`'s samples, mapped.
// `views` keeps their shards open.
Result<std::vector<Stored>> CollectBlobs(const shardify::Dataset& ds, const std::string& split, size_t* field,
                                         uint64_t* raw_size, std::vector<shardify::SampleView>* views) {
  const shardify::Manifest& m = ds.manifest();
  const shardify::SplitInfo* s = m.FindSplit(split);
  if (s == nullptr) return shardify::InvalidArgument("no split '" + split + "'");
  *field = m.fields.size();
  for (size_t f = 0; f < m.fields.size() && *field == m.fields.size(); ++f)
    if (m.fields[f].kind == shardify::FieldKind::kNdarray && !m.fields[f].chunked()) *field = f;
  if (*field == m.fields.size()) return shardify::InvalidArgument("no ndarray field stored as one blob per sample");
  std::vector<Stored> blobs;
  blobs.reserve(s->num_samples);
  views->reserve(s->num_samples);
  for (uint64_t i = s->first_sample; i < s->first_sample + s->num_samples; ++i) {
    ASSIGN_OR_RETURN(shardify::SampleView v, ds.Sample(i));
    ASSIGN_OR_RETURN(shardify::BlobInfo b, v.blob(*field));
    if (b.data == nullptr) return shardify::Internal("sample " + std::to_string(i) + " is not mapped");
    if (blobs.empty()) *raw_size = b.raw_size;
    if (b.raw_size != *raw_size) return shardify::InvalidArgument("the field's samples differ in size");
    blobs.push_back({b.data, b.stored_size, b.codec});
    views->push_back(std::move(v));
  }
  return blobs;
}

// Decodes the stored blob of every sample of `split` (field: the first ndarray field)
// `epochs` times, shuffled per epoch unless `sequential`, on `threads` threads, as the
// format stores it: ZSTD_decompressDCtx, ZSTD_decompress_usingDDict with the field's
// dictionary, or memcpy for the blobs the writer kept raw (compression did not pay). No
// Loader, no batches, no checksum, no inverse filter. Collecting the blobs is
// open_seconds; `seconds` is the decode alone. counts[c]: blobs of codec c per epoch.
Result<LoaderBenchResult> RunBareZstd(const std::string& dir, const std::string& split, size_t threads, uint64_t epochs,
                                      uint64_t seed, bool sequential, std::map<shardify::Codec, uint64_t>* counts) {
  LoaderBenchResult r;
  const auto t0 = std::chrono::steady_clock::now();
  shardify::ReadOptions ro;
  ro.io = shardify::IoMode::kMmap;  // BlobInfo::data points into the mapping
  ASSIGN_OR_RETURN(std::unique_ptr<shardify::Dataset> ds, shardify::Dataset::Open(dir, ro));
  std::vector<shardify::SampleView> views;
  size_t field = 0;
  uint64_t raw_size = 0;
  ASSIGN_OR_RETURN(std::vector<Stored> blobs, CollectBlobs(*ds, split, &field, &raw_size, &views));
  const std::vector<uint8_t>& dict = ds->manifest().fields[field].dictionary;
  std::unique_ptr<ZSTD_DDict, size_t (*)(ZSTD_DDict*)> ddict(
      dict.empty() ? nullptr : ZSTD_createDDict(dict.data(), dict.size()), ZSTD_freeDDict);
  if (!dict.empty() && !ddict) return shardify::Corruption("the zstd dictionary cannot be loaded");
  for (const Stored& s : blobs) {
    if (s.codec == shardify::Codec::kZstdDict && !ddict)
      return shardify::Corruption("a blob uses a dictionary but the field has none");
    ++(*counts)[s.codec];
  }
  const uint64_t n = blobs.size();
  std::vector<uint32_t> order(n * epochs);
  std::mt19937_64 rng(seed);
  for (uint64_t e = 0; e < epochs; ++e) {
    uint32_t* epoch = order.data() + e * n;
    for (uint64_t i = 0; i < n; ++i) epoch[i] = static_cast<uint32_t>(i);
    if (!sequential) std::shuffle(epoch, epoch + n, rng);
  }
  const size_t workers = shardify::WorkerCount(threads, (order.size() + kBlock - 1) / kBlock);
  std::vector<std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)>> dctx;
  std::vector<std::vector<uint8_t>> out(workers, std::vector<uint8_t>(raw_size));
  for (size_t w = 0; w < workers; ++w) {
    dctx.emplace_back(ZSTD_createDCtx(), ZSTD_freeDCtx);
    if (!dctx.back()) return shardify::ResourceExhausted("cannot create a zstd context");
  }
  std::atomic<uint64_t> bad{n};  // a sample that failed to decode (n: none)
  r.open_seconds = Since(t0);
  const auto t1 = std::chrono::steady_clock::now();
  shardify::ParallelFor((order.size() + kBlock - 1) / kBlock, workers, [&](size_t block, size_t w) {
    const size_t end = std::min<size_t>(order.size(), (block + 1) * kBlock);
    for (size_t k = block * kBlock; k < end; ++k) {
      const Stored& s = blobs[order[k]];
      size_t got = s.size;
      if (s.codec == shardify::Codec::kZstdDict)
        got = ZSTD_decompress_usingDDict(dctx[w].get(), out[w].data(), raw_size, s.data, s.size, ddict.get());
      else if (s.codec == shardify::Codec::kZstd)
        got = ZSTD_decompressDCtx(dctx[w].get(), out[w].data(), raw_size, s.data, s.size);
      else
        std::memcpy(out[w].data(), s.data, std::min<size_t>(s.size, raw_size));
      if (got != raw_size) bad = order[k];
    }
  });
  r.seconds = Since(t1);
  if (bad != n)
    return shardify::Corruption("sample " + std::to_string(bad.load()) + " of split '" + split +
                                "' does not decode to its size");
  r.samples = order.size();
  r.bytes = order.size() * raw_size;
  return r;
}
}  // namespace

int main(int argc, char** argv) {
  using shardify::SampleOrder;
  CLI::App app{
      "Streams every batch of a shard dataset through the Loader (decode threads, batch "
      "ring) and prints samples/s and MB/s of decoded data. Time runs from opening the "
      "dataset to the last batch, so thread start-up and the first batch are included."};
  std::string dir;
  shardify::LoaderOptions o;
  std::string order = "shuffle";
  bool json = false, no_verify = false, bare = false;
  app.add_option("dir", dir, "dataset directory (holds manifest.sfm)")->required();
  app.add_option("--batch", o.batch_size, "samples per batch")->capture_default_str();
  app.add_option("--threads", o.threads, "decode threads; 0 = all cores")->capture_default_str();
  app.add_option("--epochs", o.sampler.epochs, "passes over the split")->capture_default_str();
  app.add_option("--prefetch", o.prefetch, "batches decoded ahead")->capture_default_str();
  app.add_option("--split", o.split, "split to read")->capture_default_str();
  app.add_option("--seed", o.sampler.seed, "shuffle seed")->capture_default_str();
  app.add_option("--order", order, shardify::SampleOrderNames())
      ->check([](const std::string& v) { return shardify::ParseSampleOrder(v) ? "" : "unknown order"; })
      ->capture_default_str();
  app.add_flag("--no-verify", no_verify, "skip the per-blob XXH3 checksum");
  app.add_flag("--stage", o.stage_to_device, "also copy each batch to the CUDA device");
  app.add_flag("--bare-zstd", bare,
               "no Loader: decompress the stored blob of the first ndarray field (the image) of every sample "
               "of the split with ZSTD_decompressDCtx (ZSTD_decompress_usingDDict for blobs stored with the "
               "field's dictionary, memcpy for blobs stored raw) on --threads threads, --epochs times, "
               "shuffled (or --order sequential); no batches, checksum or inverse filter. Time covers the "
               "decode only. The ceiling for the Loader on zstd shards");
  app.add_flag("--json", json, "print one JSON line instead of text");
  CLI11_PARSE(app, argc, argv);

  if (bare && order != "shuffle" && order != "sequential") {
    std::fprintf(stderr, "loader_bench: --bare-zstd reads in shuffle or sequential order, not %s\n", order.c_str());
    return 2;
  }
  o.sampler.order = *shardify::ParseSampleOrder(order);
  o.verify_checksums = !no_verify;
  std::map<shardify::Codec, uint64_t> counts;
  auto r = bare ? RunBareZstd(dir, o.split, o.threads, o.sampler.epochs, o.sampler.seed, order == "sequential", &counts)
                : shardify::RunLoaderBench(dir, o);
  if (!r.ok()) {
    std::fprintf(stderr, "loader_bench: %s\n", r.status().ToString().c_str());
    return 1;
  }
  if (json) {
    std::printf("%s\n", ToJson(*r).c_str());
  } else if (bare) {
    std::printf("%llu samples decoded, %.3f s (collecting the blobs: %.3f s before): %.0f samples/s, %.1f MB/s\n",
                static_cast<unsigned long long>(r->samples), r->seconds, r->open_seconds, r->samples_per_second(),
                r->megabytes_per_second());
    for (const auto& [codec, count] : counts)
      std::printf("%llu blobs per epoch stored as %s\n", static_cast<unsigned long long>(count), CodecLabel(codec));
  } else {
    std::printf(
        "%llu samples in %llu batches, %.3f s (first batch after %.3f s): "
        "%.0f samples/s, %.1f MB/s, ring %.1f MiB\n",
        static_cast<unsigned long long>(r->samples), static_cast<unsigned long long>(r->batches), r->seconds,
        r->first_batch_seconds, r->samples_per_second(), r->megabytes_per_second(), r->ring_bytes / 1048576.0);
  }
  return 0;
}
