#include <algorithm>

#include "reader/prefetch_internal.h"
#include "storage/remote.h"

namespace shardify::detail {

ShardPrefetcher::ShardPrefetcher(std::shared_ptr<const Dataset> dataset, Sampler sampler, size_t depth)
    : dataset_(std::move(dataset)), sampler_(std::move(sampler)), depth_(std::max<size_t>(depth, 1)) {
  for (size_t k = 0; k < std::min<size_t>(depth_, 4); ++k) fetchers_.emplace_back([this] { Fetch(); });
  thread_ = std::thread([this] { Run(); });
}

ShardPrefetcher::~ShardPrefetcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  queued_cv_.notify_all();
  thread_.join();
  for (std::thread& t : fetchers_) t.join();
}

void ShardPrefetcher::Fetch() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    queued_cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    const size_t shard = queue_.front();
    queue_.pop_front();
    lock.unlock();
    dataset_->Prefetch(shard).IgnoreError();  // a failure shows when the ring opens the shard
    lock.lock();
  }
}

void ShardPrefetcher::Planned(uint64_t seq) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    planned_ = std::max(planned_, seq + 1);
  }
  cv_.notify_all();
}

size_t ShardPrefetcher::DepthFor(const Dataset& dataset) {
  const storage::RemoteDataset* remote = dataset.remote();
  if (remote == nullptr || remote->cache() == nullptr) return 0;
  return static_cast<size_t>(std::clamp<uint64_t>(remote->ShardsHeld() / 4, 1, 8));
}

void ShardPrefetcher::Run() {
  struct Ahead {
    size_t shard;
    uint64_t needed_by;  // the batch that reads it first
  };
  std::deque<Ahead> ahead;  // queued or fetched, for batches not planned yet
  uint64_t cursor = 0;      // the next batch to look at
  uint64_t order_epoch = UINT64_MAX;
  std::vector<uint64_t> order, indices;
  const uint64_t total = sampler_.total_batches();
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    while (!ahead.empty() && ahead.front().needed_by < planned_) ahead.pop_front();  // opened by the ring
    cursor = std::max(cursor, planned_);
    if (ahead.size() >= depth_ || cursor >= total) {
      cv_.wait(lock);
      continue;
    }
    const uint64_t seq = cursor++;
    lock.unlock();
    const SamplerState at = sampler_.Advance(seq);
    if (at.epoch != order_epoch) {
      order = sampler_.EpochOrder(at.epoch);
      order_epoch = at.epoch;
    }
    sampler_.BatchIndices(order, at.step, &indices);
    std::vector<size_t> shards;
    for (uint64_t i : indices) {
      const size_t s = dataset_->ShardOfSample(i);
      if (std::find(shards.begin(), shards.end(), s) == shards.end()) shards.push_back(s);
    }
    lock.lock();
    for (size_t s : shards) {
      if (ahead.size() >= depth_) break;
      if (std::any_of(ahead.begin(), ahead.end(), [s](const Ahead& a) { return a.shard == s; })) continue;
      ahead.push_back({s, seq});
      queue_.push_back(s);
      queued_cv_.notify_one();
    }
  }
}

}  // namespace shardify::detail
