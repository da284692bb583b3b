// shards_bench: how reading scales with the number of shards. Writes the same synthetic
// samples (28x28 u8 images and an int label, stored raw) as datasets of 10, 100 and 1,000
// shards, and reads each shuffled through the Loader (mmap and pread); then opens a
// dataset of 1.28M samples in 500 shards and times its first batch. Each read runs in its
// own child process, so its memory figures are its own: RssAnon (the shard indices, the
// order, the ring) and RssFile (mapped shard pages, page cache that the kernel reclaims).
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "base/file.h"
#include "format/writer.h"
#include "reader/loader.h"

namespace {
using shardify::Result;
using shardify::Status;

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// "VmHWM" etc. of /proc/self/status, in MiB.
double StatusMiB(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size() + 1, key + ":") == 0) return std::stod(line.substr(key.size() + 1)) / 1024.0;
  }
  return 0;
}

uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// `samples` images of side x side u8 with a label, raw, in about `shards` shards. Kept when
// a dataset of that many samples is already there.
Status WriteDataset(const std::string& dir, uint64_t samples, uint64_t shards, int64_t side) {
  if (shardify::PathExists(shardify::JoinPath(dir, "manifest.sfm"))) return Status::Ok();
  const uint64_t image_bytes = static_cast<uint64_t>(side * side);
  std::vector<shardify::FieldSpec> fields(2);
  fields[0].name = "image";
  fields[0].dtype = shardify::DType::kU8;
  fields[0].shape = {1, side, side};
  fields[1].name = "label";
  fields[1].kind = shardify::FieldKind::kInt;
  shardify::WriterOptions o;
  o.codec = shardify::Codec::kRaw;
  o.fsync = false;
  o.overwrite = true;
  o.compute_stats = false;
  // A raw blob is 64-byte aligned; the shard closes once it reaches the target.
  const uint64_t stored = (image_bytes + 63) / 64 * 64;
  o.target_shard_bytes = std::max<uint64_t>(1, (samples + shards - 1) / shards * stored - stored / 2);
  ASSIGN_OR_RETURN(auto w, shardify::DatasetWriter::Create(dir, fields, o));
  for (uint64_t i = 0; i < samples; ++i) {
    shardify::SampleInput s;
    std::vector<uint8_t> px(image_bytes);
    for (uint64_t k = 0; k < image_bytes; k += 8) {
      const uint64_t r = Mix(i * 131 + k);
      for (uint64_t b = 0; b < 8 && k + b < image_bytes; ++b) px[k + b] = static_cast<uint8_t>(r >> (8 * b));
    }
    s.values.push_back(shardify::FieldValue::Array(std::move(px), {1, side, side}));
    s.values.push_back(shardify::FieldValue::Int(static_cast<int64_t>(i % 10)));
    RETURN_IF_ERROR(w->Append(std::move(s)));
  }
  return w->Finish();
}

// Runs `fn` in a child process and waits; the child's output is its report.
template <typename Fn>
void InChild(Fn fn) {
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    const Status s = fn();
    if (!s.ok()) std::fprintf(stderr, "shards_bench: %s\n", s.ToString().c_str());
    std::fflush(stdout);
    _exit(s.ok() ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
}

std::string ShardCount(const std::string& dir) {
  auto ds = shardify::Dataset::Open(dir);
  return ds.ok() ? std::to_string((*ds)->manifest().shards.size()) : "?";
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"How reading scales with the shard count (prints figures, asserts nothing)"};
  std::string work = "/tmp/shardify-bench-shards";
  uint64_t samples = 200000, open_samples = 1280000, open_shards = 500;
  size_t batch = 256, threads = 2, epochs = 5;
  size_t max_open = 0;
  bool quick = false;
  app.add_option("--work", work, "where the datasets are written (kept for the next run)");
  app.add_option("--samples", samples, "samples of each 28x28 dataset");
  app.add_option("--batch", batch, "batch size");
  app.add_option("--threads", threads, "decode threads");
  app.add_option("--epochs", epochs, "epochs read");
  app.add_option("--open-samples", open_samples, "samples of the dataset whose first batch is timed");
  app.add_option("--open-shards", open_shards, "its shards");
  app.add_option("--max-open-shards", max_open, "shards kept open (0: automatic)");
  app.add_flag("--quick", quick, "20,000 samples, 1 epoch, 128,000 samples in 50 shards");
  CLI11_PARSE(app, argc, argv);
  if (quick) {
    samples = 20000;
    epochs = 1;
    open_samples = 128000;
    open_shards = 50;
  }
  struct rlimit nofile {};
  getrlimit(RLIMIT_NOFILE, &nofile);
  std::printf("file descriptors: soft limit %llu, hard limit %llu\n", static_cast<unsigned long long>(nofile.rlim_cur),
              static_cast<unsigned long long>(nofile.rlim_max));
  std::printf("%-8s %-6s %7s %14s %14s %12s %12s %12s\n", "shards", "io", "batch", "samples/s", "after epoch 1",
              "first batch", "RssAnon MiB", "RssFile MiB");
  for (uint64_t count : {10, 100, 1000}) {
    const std::string dir = work + "/s" + std::to_string(samples) + "-" + std::to_string(count);
    const Status written = WriteDataset(dir, samples, count, 28);
    if (!written.ok()) {
      std::fprintf(stderr, "shards_bench: %s\n", written.ToString().c_str());
      return 1;
    }
    const std::string shards = ShardCount(dir);
    for (shardify::IoMode io : {shardify::IoMode::kMmap, shardify::IoMode::kPread}) {
      InChild([&]() -> Status {
        shardify::LoaderOptions o;
        o.batch_size = batch;
        o.threads = threads;
        o.sampler.epochs = epochs;
        o.sampler.seed = 1;
        o.io = io;
        o.max_open_shards = max_open;
        const auto start = std::chrono::steady_clock::now();
        ASSIGN_OR_RETURN(auto loader, shardify::Loader::Open(dir, o));
        double first = 0, later_start = 0;
        uint64_t n = 0, later = 0;  // samples in all, and in epochs after the first
        while (true) {
          ASSIGN_OR_RETURN(auto b, loader->Next());
          if (!b) break;
          if (n == 0) first = Since(start);
          if (b->epoch == 1 && b->step == 0) later_start = Since(start);
          if (b->epoch >= 1) later += b->size();
          n += b->size();
        }
        const double seconds = Since(start);
        const double later_rate = later > 0 ? later / (seconds - later_start) : 0;
        std::printf("%-8s %-6s %7zu %14.0f %14.0f %10.1f ms %12.1f %12.1f\n", shards.c_str(), shardify::IoModeName(io),
                    batch, n / seconds, later_rate, first * 1e3, StatusMiB("RssAnon"), StatusMiB("RssFile"));
        return Status::Ok();
      });
    }
  }
  const std::string big = work + "/open-" + std::to_string(open_samples) + "-" + std::to_string(open_shards);
  const auto t0 = std::chrono::steady_clock::now();
  const Status written = WriteDataset(big, open_samples, open_shards, 8);
  if (!written.ok()) {
    std::fprintf(stderr, "shards_bench: %s\n", written.ToString().c_str());
    return 1;
  }
  std::printf("\n%llu samples (8x8 u8) in %s shards, written in %.1f s (0 when kept)\n",
              static_cast<unsigned long long>(open_samples), ShardCount(big).c_str(), Since(t0));
  InChild([&]() -> Status {
    const double before = StatusMiB("RssAnon");
    shardify::LoaderOptions o;
    o.batch_size = batch;
    o.threads = threads;
    o.sampler.seed = 1;
    const auto start = std::chrono::steady_clock::now();
    ASSIGN_OR_RETURN(auto loader, shardify::Loader::Open(big, o));
    const double opened = Since(start);
    ASSIGN_OR_RETURN(auto first, loader->Next());
    const double first_batch = Since(start);
    const double after_first = StatusMiB("RssAnon");
    first.reset();
    uint64_t n = 0;
    while (true) {
      ASSIGN_OR_RETURN(auto b, loader->Next());
      if (!b) break;
      n += b->size();
    }
    const double all = Since(start);
    const double after_epoch = StatusMiB("RssAnon");
    std::printf(
        "open %.1f ms, first batch %.1f ms, RssAnon +%.1f MiB after it; whole epoch %.2f s (%.0f samples/s), "
        "RssAnon +%.1f MiB after it (%.1f bytes a sample)\n",
        opened * 1e3, first_batch * 1e3, after_first - before, all, n / all, after_epoch - before,
        (after_epoch - before) * 1048576.0 / static_cast<double>(open_samples));
    return Status::Ok();
  });
  return 0;
}
