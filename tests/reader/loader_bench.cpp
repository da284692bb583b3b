// loader_bench: how fast the Loader streams a dataset's batches.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>
#include <string>

#include "reader/bench.h"

int main(int argc, char** argv) {
  using shardify::SampleOrder;
  CLI::App app{
      "Streams every batch of a shard dataset through the Loader (decode threads, batch "
      "ring) and prints samples/s and MB/s of decoded data. Time runs from opening the "
      "dataset to the last batch, so thread start-up and the first batch are included."};
  std::string dir;
  shardify::LoaderOptions o;
  std::string order = "shuffle";
  bool json = false, no_verify = false;
  app.add_option("dir", dir, "dataset directory (holds manifest.sfm)")->required();
  app.add_option("--batch", o.batch_size, "samples per batch")->capture_default_str();
  app.add_option("--threads", o.threads, "decode threads; 0 = all cores")->capture_default_str();
  app.add_option("--epochs", o.sampler.epochs, "passes over the split")->capture_default_str();
  app.add_option("--prefetch", o.prefetch, "batches decoded ahead")->capture_default_str();
  app.add_option("--split", o.split, "split to read")->capture_default_str();
  app.add_option("--seed", o.sampler.seed, "shuffle seed")->capture_default_str();
  app.add_option("--order", order, "sequential, shuffle, windowed or balanced")
      ->check(CLI::IsMember({"sequential", "shuffle", "windowed", "balanced"}))
      ->capture_default_str();
  app.add_flag("--no-verify", no_verify, "skip the per-blob XXH3 checksum");
  app.add_flag("--stage", o.stage_to_device, "also copy each batch to the CUDA device");
  app.add_flag("--json", json, "print one JSON line instead of text");
  CLI11_PARSE(app, argc, argv);

  const std::map<std::string, SampleOrder> orders = {{"sequential", SampleOrder::kSequential},
                                                     {"shuffle", SampleOrder::kShuffle},
                                                     {"windowed", SampleOrder::kShardWindowed},
                                                     {"balanced", SampleOrder::kClassBalanced}};
  o.sampler.order = orders.at(order);
  o.verify_checksums = !no_verify;
  auto r = shardify::RunLoaderBench(dir, o);
  if (!r.ok()) {
    std::fprintf(stderr, "loader_bench: %s\n", r.status().ToString().c_str());
    return 1;
  }
  if (json) {
    std::printf("%s\n", shardify::ToJson(*r).c_str());
  } else {
    std::printf(
        "%llu samples in %llu batches, %.3f s (first batch after %.3f s): "
        "%.0f samples/s, %.1f MB/s, ring %.1f MiB\n",
        static_cast<unsigned long long>(r->samples), static_cast<unsigned long long>(r->batches), r->seconds,
        r->first_batch_seconds, r->samples_per_second(), r->megabytes_per_second(), r->ring_bytes / 1048576.0);
  }
  return 0;
}
