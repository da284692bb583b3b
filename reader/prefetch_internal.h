// Fetching a remote dataset's shards ahead of the sampler's order, so that the Loader's
// workers find them in the cache.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "format/dataset.h"
#include "reader/sampler.h"

namespace shardify::detail {

class ShardPrefetcher {
 public:
  // Starts a thread that keeps the shards of the next batches (after the last one planned)
  // fetched, at most `depth` shards ahead, by up to 4 transfers at once (each shard's
  // latency then overlaps the others' transfers). Errors are left for the reads to report.
  ShardPrefetcher(std::shared_ptr<const Dataset> dataset, Sampler sampler, size_t depth);
  ~ShardPrefetcher();  // stops and joins the threads
  ShardPrefetcher(const ShardPrefetcher&) = delete;
  ShardPrefetcher& operator=(const ShardPrefetcher&) = delete;

  // The ring planned batch `seq` (its shards are being opened now).
  void Planned(uint64_t seq);

  // How many shards the cache of `dataset` allows to fetch ahead: a quarter of the shards
  // its limit holds, between 1 and 8; 0 for a local dataset (nothing to fetch).
  static size_t DepthFor(const Dataset& dataset);

 private:
  void Run();    // looks ahead in the order and queues shards
  void Fetch();  // fetches queued shards

  const std::shared_ptr<const Dataset> dataset_;
  const Sampler sampler_;
  const size_t depth_;
  std::mutex mu_;
  std::condition_variable cv_, queued_cv_;
  uint64_t planned_ = 0;      // batches planned so far
  std::deque<size_t> queue_;  // shards to fetch
  bool stop_ = false;
  std::thread thread_;
  std::vector<std::thread> fetchers_;
};

}  // namespace shardify::detail
