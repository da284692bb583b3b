#include "reader/sampler.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "base/step_rng.h"

namespace shardify {
namespace {

// The order's generator, SplitMix64 seeded by (seed, epoch, stream): its output is fixed by
// its definition, so orders are identical across compilers and standard libraries.
class OrderRng {
 public:
  OrderRng(uint64_t seed, uint64_t epoch, uint64_t stream)
      : state_(SplitMix64Mix(seed) ^ SplitMix64Mix(epoch * 0x9E3779B97F4A7C15ull + stream)) {}

  uint64_t Next() { return SplitMix64Next(state_); }

  // Uniform in [0, n), n > 0, without modulo bias (Lemire's method).
  uint64_t Below(uint64_t n) {
    unsigned __int128 m = static_cast<unsigned __int128>(Next()) * n;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < n) {
      const uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(Next()) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

 private:
  uint64_t state_;
};

template <typename It>
void FisherYates(It begin, It end, OrderRng& rng) {
  const uint64_t n = static_cast<uint64_t>(end - begin);
  for (uint64_t i = n; i > 1; --i) {
    const uint64_t j = rng.Below(i);
    std::swap(begin[i - 1], begin[j]);
  }
}

Status CheckOptions(const SamplerOptions& options, uint64_t count, size_t batch_size) {
  if (batch_size == 0) return InvalidArgument("sampler: batch_size must be >= 1");
  if (options.world_size == 0) return InvalidArgument("sampler: world_size must be >= 1");
  if (options.rank >= options.world_size) {
    return InvalidArgument("sampler: rank " + std::to_string(options.rank) + " must be < world_size " +
                           std::to_string(options.world_size));
  }
  if (options.window_shards == 0) return InvalidArgument("sampler: window_shards must be >= 1");
  if (count == 0) return InvalidArgument("sampler: the split has no samples");
  if (options.repeats == 0 || options.repeats > (uint64_t{1} << 40) / count) {
    return InvalidArgument("sampler: repeats must be >= 1 and keep an epoch under 2^40 samples");
  }
  return Status::Ok();
}

// Members of each class (label >= 0), classes in ascending label order.
Result<std::vector<std::vector<uint64_t>>> GroupByClass(const std::vector<int64_t>& labels, uint64_t first,
                                                        uint64_t count) {
  if (labels.size() != count) {
    return InvalidArgument("sampler: class-balanced order needs one label per sample (" + std::to_string(count) +
                           "), got " + std::to_string(labels.size()));
  }
  std::map<int64_t, std::vector<uint64_t>> classes;
  for (uint64_t i = 0; i < count; ++i) {
    if (labels[i] >= 0) classes[labels[i]].push_back(first + i);
  }
  if (classes.empty()) return InvalidArgument("sampler: class-balanced order: no sample has a label >= 0");
  std::vector<std::vector<uint64_t>> out;
  for (auto& entry : classes) out.push_back(std::move(entry.second));
  return out;
}

Status CheckResume(const SamplerState& r, uint64_t epochs, uint64_t batches) {
  const bool past = r.step > batches || r.epoch > epochs || (r.epoch == epochs && r.step > 0) ||
                    (r.step == batches && r.epoch + 1 > epochs);
  if (!past) return Status::Ok();
  return OutOfRange("sampler: resume point (epoch " + std::to_string(r.epoch) + ", step " + std::to_string(r.step) +
                    ") is past the run (" + std::to_string(epochs) + " epochs of " + std::to_string(batches) +
                    " batches)");
}

}  // namespace

namespace {
struct OrderName {
  SampleOrder order;
  const char* name;
  const char* alias;  // also accepted by ParseSampleOrder; null when none
};
constexpr OrderName kOrderNames[] = {
    {SampleOrder::kSequential, "sequential", nullptr},
    {SampleOrder::kShuffle, "shuffle", nullptr},
    {SampleOrder::kShardWindowed, "shard_windowed", "windowed"},
    {SampleOrder::kClassBalanced, "class_balanced", "balanced"},
};
}  // namespace

const char* SampleOrderName(SampleOrder order) {
  for (const OrderName& o : kOrderNames) {
    if (o.order == order) return o.name;
  }
  return "?";
}

std::optional<SampleOrder> ParseSampleOrder(std::string_view name) {
  for (const OrderName& o : kOrderNames) {
    if (name == o.name || (o.alias != nullptr && name == o.alias)) return o.order;
  }
  return std::nullopt;
}

std::string SampleOrderNames(const std::string& separator) {
  std::string out;
  for (const OrderName& o : kOrderNames) out += (out.empty() ? "" : separator) + std::string(o.name);
  return out;
}

Result<Sampler> Sampler::Create(const SamplerOptions& options, uint64_t first, uint64_t count, size_t batch_size,
                                std::vector<uint64_t> shard_starts, std::vector<int64_t> labels) {
  RETURN_IF_ERROR(CheckOptions(options, count, batch_size));
  Sampler s;
  s.options_ = options;
  s.first_ = first;
  s.count_ = count;
  s.batch_size_ = batch_size;
  const uint64_t world = options.world_size;
  const uint64_t total = count * options.repeats;  // samples in an epoch
  s.per_rank_ = options.drop_last ? total / world : (total + world - 1) / world;
  s.batches_ = options.drop_last ? s.per_rank_ / batch_size : (s.per_rank_ + batch_size - 1) / batch_size;
  if (s.batches_ == 0) {
    return InvalidArgument("sampler: " + std::to_string(count) + " samples over " + std::to_string(world) +
                           " ranks give no full batch of " + std::to_string(batch_size) + " with drop_last");
  }
  if (options.order == SampleOrder::kShardWindowed) {
    if (shard_starts.empty()) shard_starts.push_back(first);
    s.shard_starts_ = std::move(shard_starts);
  }
  if (options.order == SampleOrder::kClassBalanced) {
    ASSIGN_OR_RETURN(s.by_class_, GroupByClass(labels, first, count));
  }
  if (options.resume) RETURN_IF_ERROR(CheckResume(*options.resume, options.epochs, s.batches_));
  return s;
}

SamplerState Sampler::start() const {
  SamplerState s = options_.resume.value_or(SamplerState{});
  if (s.step == batches_) s = SamplerState{s.epoch + 1, 0};  // "end of epoch" = next epoch
  return s;
}

uint64_t Sampler::total_batches() const {
  const SamplerState s = start();
  if (s.epoch >= options_.epochs) return 0;
  return (options_.epochs - s.epoch) * batches_ - s.step;
}

SamplerState Sampler::Advance(uint64_t n) const {
  const SamplerState s = start();
  const uint64_t flat = s.epoch * batches_ + s.step + n;
  return SamplerState{flat / batches_, flat % batches_};
}

std::vector<uint64_t> Sampler::EpochOrder(uint64_t epoch) const {
  if (options_.repeats <= 1) return PassOrder(epoch);
  std::vector<uint64_t> order;
  order.reserve(count_ * options_.repeats);
  for (uint64_t r = 0; r < options_.repeats; ++r) {
    const std::vector<uint64_t> pass = PassOrder(epoch * options_.repeats + r);
    order.insert(order.end(), pass.begin(), pass.end());
  }
  return order;
}

std::vector<uint64_t> Sampler::PassOrder(uint64_t pass) const {
  const uint64_t epoch = pass;  // a pass is seeded as an epoch is without repeats
  std::vector<uint64_t> order(count_);
  switch (options_.order) {
    case SampleOrder::kSequential:
      for (uint64_t i = 0; i < count_; ++i) order[i] = first_ + i;
      break;
    case SampleOrder::kShuffle: {
      for (uint64_t i = 0; i < count_; ++i) order[i] = first_ + i;
      OrderRng rng(options_.seed, epoch, 0);
      FisherYates(order.begin(), order.end(), rng);
      break;
    }
    case SampleOrder::kShardWindowed: {
      // The shards' pieces inside the split, as [begin, end) ranges.
      const uint64_t end = first_ + count_;
      std::vector<uint64_t> cuts = {first_};
      for (uint64_t start : shard_starts_) {
        if (start > cuts.back() && start < end) cuts.push_back(start);
      }
      cuts.push_back(end);
      std::vector<std::pair<uint64_t, uint64_t>> pieces;
      for (size_t k = 0; k + 1 < cuts.size(); ++k) pieces.emplace_back(cuts[k], cuts[k + 1]);
      OrderRng rng(options_.seed, epoch, 1);
      FisherYates(pieces.begin(), pieces.end(), rng);
      size_t pos = 0;
      for (size_t w = 0; w < pieces.size(); w += options_.window_shards) {
        const size_t window_begin = pos;
        for (size_t k = w; k < std::min(pieces.size(), w + options_.window_shards); ++k) {
          for (uint64_t i = pieces[k].first; i < pieces[k].second; ++i) order[pos++] = i;
        }
        FisherYates(order.begin() + window_begin, order.begin() + pos, rng);
      }
      break;
    }
    case SampleOrder::kClassBalanced: {
      OrderRng rng(options_.seed, epoch, 2);
      for (uint64_t i = 0; i < count_; ++i) {
        const auto& members = by_class_[rng.Below(by_class_.size())];
        order[i] = members[rng.Below(members.size())];
      }
      break;
    }
  }
  return order;
}

void Sampler::BatchIndices(const std::vector<uint64_t>& order, uint64_t step, std::vector<uint64_t>* out) const {
  out->clear();
  const uint64_t world = options_.world_size;
  const uint64_t begin = step * batch_size_;
  const uint64_t end = std::min<uint64_t>(begin + batch_size_, per_rank_);
  for (uint64_t j = begin; j < end; ++j) {
    const uint64_t position = options_.rank + j * world;
    out->push_back(order[position % order.size()]);  // positions past the end wrap around
  }
}

}  // namespace shardify
