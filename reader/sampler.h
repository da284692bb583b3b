// Sampler: which samples make up each batch of each epoch, deterministically from a seed.
//
// Pure logic, no I/O: given the split's sample range (and, for class-balanced sampling,
// the labels), it yields batches of global sample indices. The same options always give
// the same batches. State() / resume give exact mid-epoch restarts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace shardify {

enum class SampleOrder {
  kSequential,     // split order
  kShuffle,        // a seeded permutation of the whole split every epoch
  kShardWindowed,  // shuffle shard order, then samples within a window of shards
  kClassBalanced,  // draw with replacement, each class equally likely
};

// The orders' names, one set for the C++ API, `shardtrain --order` and Python's `order=`:
// "sequential", "shuffle", "shard_windowed", "class_balanced". ParseSampleOrder also takes
// "windowed" and "balanced", shardtrain's earlier names for the last two.
const char* SampleOrderName(SampleOrder order);
std::optional<SampleOrder> ParseSampleOrder(std::string_view name);
// "sequential, shuffle, shard_windowed, class_balanced" with `separator` between them.
std::string SampleOrderNames(const std::string& separator = ", ");

struct SamplerState {
  uint64_t epoch = 0;
  uint64_t step = 0;  // next batch within the epoch
  bool operator==(const SamplerState& o) const { return epoch == o.epoch && step == o.step; }
};

struct SamplerOptions {
  SampleOrder order = SampleOrder::kShuffle;
  uint64_t seed = 0;
  uint64_t epochs = 1;
  size_t rank = 0;  // this process's rank in distributed training
  size_t world_size = 1;
  bool drop_last = false;  // drop the last partial batch (of each rank)
  // Passes over the split in one epoch (>= 1): the epoch order is `repeats` orders of the
  // split one after another (each drawn as a whole epoch's order would be). For a few
  // large volumes read as random patches, where one pass is only a few batches.
  uint64_t repeats = 1;
  size_t window_shards = 4;            // kShardWindowed: shards mixed together
  std::optional<SamplerState> resume;  // start here instead of (0, 0)
};

// The order of one split, batch by batch, for one rank. Immutable after Create().
//
// Epoch order: kSequential is split order; kShuffle is a Fisher-Yates permutation of
// the whole split driven by splitmix64 seeded with (seed, epoch), identical on every
// platform; kShardWindowed shuffles the shard order, cuts it into windows of
// `window_shards` shards and shuffles the samples within each window (trade-off: only
// a window's shards are read at a time, so page cache and open mappings stay small on
// datasets far larger than RAM, but a batch mixes samples of at most `window_shards`
// shards, a weaker shuffle than kShuffle); kClassBalanced draws split-size samples per
// epoch with replacement, first a class uniformly among the classes present, then a
// sample of it uniformly (samples with a negative label are never drawn).
//
// Distributed partition: the epoch order is the same on every rank; rank r takes
// positions r, r + world, r + 2 world, ... Without drop_last the order is padded by
// wrapping around to its start until its length is a multiple of world_size (at most
// world_size - 1 samples are read twice per epoch); with drop_last the tail is dropped
// instead, and so is each rank's partial last batch. Every rank then has the same number
// of samples and of batches; the last batch of a rank is partial unless drop_last.
//
// Thread-safety: const methods may be called from any number of threads.
class Sampler {
 public:
  // `first`, `count`: the split's global sample range. `shard_starts`: global index of
  // the first sample of each shard, ascending (used by kShardWindowed). `labels`: one
  // per split sample (used by kClassBalanced; may be empty otherwise).
  // Errors: batch_size 0, repeats 0, rank >= world_size, world_size 0, window_shards 0, an empty
  // split, a resume point past the end, kClassBalanced without labels >= 0.
  static Result<Sampler> Create(const SamplerOptions& options, uint64_t first, uint64_t count, size_t batch_size,
                                std::vector<uint64_t> shard_starts = {}, std::vector<int64_t> labels = {});

  // Samples this rank sees per epoch (after padding or dropping).
  uint64_t samples_per_rank() const { return options_.drop_last ? batches_ * batch_size_ : per_rank_; }
  uint64_t batches_per_epoch() const { return batches_; }
  const SamplerOptions& options() const { return options_; }
  // Where the run starts: options.resume or (0, 0).
  SamplerState start() const;
  // Total batches from start() to the end of the last epoch.
  uint64_t total_batches() const;
  // The state `n` batches after start().
  SamplerState Advance(uint64_t n) const;

  // The whole epoch's order over the split (global indices, before partitioning), of
  // count x repeats entries.
  std::vector<uint64_t> EpochOrder(uint64_t epoch) const;
  // Global indices of this rank's batch `step` of an epoch whose EpochOrder is `order`.
  // Preconditions: step < batches_per_epoch().
  void BatchIndices(const std::vector<uint64_t>& order, uint64_t step, std::vector<uint64_t>* out) const;

 private:
  Sampler() = default;
  std::vector<uint64_t> PassOrder(uint64_t pass) const;  // one pass over the split
  SamplerOptions options_;
  uint64_t first_ = 0, count_ = 0;
  size_t batch_size_ = 0;
  uint64_t per_rank_ = 0, batches_ = 0;
  std::vector<uint64_t> shard_starts_;
  std::vector<std::vector<uint64_t>> by_class_;  // kClassBalanced: members per class
};

}  // namespace shardify
