// Distributed options from the launcher's environment, and what Train does with its
// RankGroup: gradient buckets, model broadcast, metric sums, resume points.
#include "trainer/distributed.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>

#include "trainer/distributed_internal.h"

namespace shardify::trainer {

namespace {

// `fallback` when unset; an error naming the variable when it is not an integer.
Result<int> EnvInt(const EnvLookup& env, const char* name, int fallback, bool* found = nullptr) {
  const char* v = env(name);
  if (v == nullptr || *v == '\0') return fallback;
  errno = 0;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (*end != '\0' || errno != 0 || x < INT_MIN || x > INT_MAX) {
    return InvalidArgument(std::string(name) + "='" + v + "' is not an integer");
  }
  if (found != nullptr) *found = true;
  return static_cast<int>(x);
}

}  // namespace

Result<DistributedOptions> DistributedFromEnvironment(DistributedOptions o, const EnvLookup& env) {
  bool has_rank = false, has_world = false;
  ASSIGN_OR_RETURN(o.rank, EnvInt(env, "RANK", o.rank, &has_rank));
  ASSIGN_OR_RETURN(o.world_size, EnvInt(env, "WORLD_SIZE", o.world_size, &has_world));
  if (has_rank != has_world) {
    return InvalidArgument(std::string(has_rank ? "RANK" : "WORLD_SIZE") + " is set but " +
                           (has_rank ? "WORLD_SIZE" : "RANK") + " is not; a launcher sets both");
  }
  ASSIGN_OR_RETURN(o.local_rank, EnvInt(env, "LOCAL_RANK", o.local_rank));
  ASSIGN_OR_RETURN(o.local_world_size, EnvInt(env, "LOCAL_WORLD_SIZE", o.local_world_size));
  if (const char* a = env("MASTER_ADDR"); a != nullptr && *a != '\0') o.master_addr = a;
  ASSIGN_OR_RETURN(o.master_port, EnvInt(env, "MASTER_PORT", o.master_port));
  if (const char* s = env("TORCHELASTIC_USE_AGENT_STORE"); s != nullptr) o.agent_store = std::string(s) == "True";
  ASSIGN_OR_RETURN(o.restart_count, EnvInt(env, "TORCHELASTIC_RESTART_COUNT", o.restart_count));
  if (const char* i = env("GLOO_SOCKET_IFNAME"); i != nullptr && *i != '\0') o.interface = i;
  return o;
}

Status CheckDistributedOptions(const DistributedOptions& o) {
  if (o.world_size < 1) return InvalidArgument("world size must be >= 1, not " + std::to_string(o.world_size));
  if (o.rank < 0 || o.rank >= o.world_size) {
    return InvalidArgument("rank " + std::to_string(o.rank) + " is outside 0.." + std::to_string(o.world_size - 1) +
                           " (world size " + std::to_string(o.world_size) + ")");
  }
  if (o.local_rank < 0 || o.local_world_size < 1) {
    return InvalidArgument("local rank must be >= 0 and local world size >= 1");
  }
  if (o.master_port < 1 || o.master_port > 65535) {
    return InvalidArgument("master port " + std::to_string(o.master_port) + " is outside 1..65535");
  }
  if (o.backend != "auto" && o.backend != "gloo" && o.backend != "nccl") {
    return InvalidArgument("unknown distributed backend '" + o.backend + "' (auto, gloo, nccl)");
  }
  if (!(o.timeout_s > 0) || !(o.bucket_mb > 0)) {
    return InvalidArgument("distributed timeout and bucket size must be > 0");
  }
  return Status::Ok();
}

namespace detail {

std::string Disagreement(const AgreedValues& first, const AgreedValues& other, int rank) {
  const std::string other_rank = "rank " + std::to_string(rank);
  for (size_t i = 0; i < std::max(first.size(), other.size()); ++i) {
    if (i >= first.size() || i >= other.size() || first[i].first != other[i].first) {
      return "rank 0 and " + other_rank + " run different builds of shardtrain (they compare different settings)";
    }
    if (first[i].second != other[i].second) {
      return "the ranks disagree on " + first[i].first + ": '" + first[i].second + "' on rank 0, '" + other[i].second +
             "' on " + other_rank + "; start every rank with the same options and dataset";
    }
  }
  return "";
}

Status RankDevice(const DistributedOptions& o, torch::Device* device) {
  if (!device->is_cuda()) return Status::Ok();
  if (!device->has_index()) {
    const int64_t count = static_cast<int64_t>(torch::cuda::device_count());
    if (o.local_rank >= count) {
      return InvalidArgument("local rank " + std::to_string(o.local_rank) + " has no CUDA device of its own (this " +
                             "machine has " + std::to_string(count) + "): start at most that many ranks per machine");
    }
    *device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(o.local_rank));
  }
  c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->setDevice(*device);
  return Status::Ok();
}

Status BroadcastModel(RankGroup& group, Model& model) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> tensors = model.parameters();
  for (const torch::Tensor& b : model.buffers()) tensors.push_back(b);
  return group.Broadcast(tensors, "broadcasting rank 0's weights");
}

Status AverageBuffers(RankGroup& group, Model& model) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> buffers;
  for (const torch::Tensor& b : model.buffers()) {
    if (b.is_floating_point()) buffers.push_back(b);
  }
  RETURN_IF_ERROR(group.SumInPlace(buffers, "averaging batch-norm statistics"));
  for (torch::Tensor& b : buffers) b.div_(group.world_size());
  return Status::Ok();
}

uint64_t OwnedSamples(uint64_t count, int rank, int world) {
  const uint64_t r = static_cast<uint64_t>(rank), w = static_cast<uint64_t>(world);
  return count > r ? (count - r + w - 1) / w : 0;
}

Status SumMetrics(RankGroup& group, ClassMetrics* m) {
  const int world = group.world_size(), rank = group.rank();
  const int64_t k = m->num_classes(), n = m->count();
  std::vector<double> counts(static_cast<size_t>(world), 0.0);
  counts[static_cast<size_t>(rank)] = static_cast<double>(n);
  ASSIGN_OR_RETURN(counts, group.Sum(counts, "counting evaluation results"));
  int64_t offset = 0, total = 0;
  for (int q = 0; q < world; ++q) {
    if (q < rank) offset += static_cast<int64_t>(counts[static_cast<size_t>(q)]);
    total += static_cast<int64_t>(counts[static_cast<size_t>(q)]);
  }
  // Each rank fills its own rows; the sum over ranks is every rank's rows.
  std::vector<torch::Tensor> t = {torch::zeros({total, 2}, torch::kLong), torch::zeros({total, k}, torch::kFloat)};
  if (n > 0) {
    t[0].narrow(0, offset, n).select(1, 0).copy_(torch::tensor(m->labels(), torch::kLong));
    t[0].narrow(0, offset, n).select(1, 1).copy_(torch::tensor(m->predicted(), torch::kLong));
    t[1].narrow(0, offset, n).view(-1).copy_(torch::tensor(m->probs(), torch::kFloat));
  }
  RETURN_IF_ERROR(group.SumInPlace(t, "gathering evaluation results"));
  const torch::Tensor labels = t[0].select(1, 0).contiguous(), predicted = t[0].select(1, 1).contiguous();
  const torch::Tensor probs = t[1].contiguous();
  ClassMetrics all(k);
  all.Append(std::vector<int64_t>(labels.data_ptr<int64_t>(), labels.data_ptr<int64_t>() + total),
             std::vector<int64_t>(predicted.data_ptr<int64_t>(), predicted.data_ptr<int64_t>() + total),
             std::vector<float>(probs.data_ptr<float>(), probs.data_ptr<float>() + total * k));
  *m = std::move(all);
  return Status::Ok();
}

namespace {
constexpr int64_t kFlags = 2;  // StepFlags in GradSync's last bucket: stop, report

template <typename M>
Status SumCounts(RankGroup& group, M* m) {
  ASSIGN_OR_RETURN(const std::vector<double> sums, group.Sum(m->Sums(), "summing Dice counts"));
  m->SetSums(sums);
  return Status::Ok();
}
}  // namespace

Status SumMetrics(RankGroup& group, DiceMetrics* m) { return SumCounts(group, m); }
Status SumMetrics(RankGroup& group, CaseDiceMetrics* m) { return SumCounts(group, m); }

SamplerState ResumePoint(const CheckpointMeta& m, int world_size, std::string* note) {
  note->clear();
  if (m.world_size == world_size) return m.sampler;
  const bool mid_epoch = m.sampler.epoch >= m.epochs_done && m.sampler.step > 0;
  *note = "resuming with " + std::to_string(world_size) + " rank(s) from a checkpoint written by " +
          std::to_string(m.world_size) +
          ": each rank's batches differ, so the run continues from the last epoch "
          "boundary, the start of epoch " +
          std::to_string(m.epochs_done + 1) +
          (mid_epoch ? " (the steps of that epoch already taken are taken again)" : "");
  return SamplerState{m.epochs_done, 0};
}

GradSync::GradSync(RankGroup& group, std::vector<torch::Tensor> params, size_t bucket_bytes)
    : group_(group), params_(std::move(params)), where_(params_.size()), seen_(params_.size(), false) {
  Bucket cur;
  size_t bytes = 0;
  int64_t offset = 0;
  auto close = [&] {
    if (cur.params.empty()) return;
    cur.flat = torch::zeros({offset}, params_[cur.params[0]].options().requires_grad(false));
    buckets_.push_back(std::move(cur));
    cur = Bucket();
    bytes = 0;
    offset = 0;
  };
  for (size_t i = params_.size(); i-- > 0;) {  // backward produces the last layers' gradients first
    const torch::Tensor& p = params_[i];
    if (!p.requires_grad()) continue;
    const size_t nbytes = static_cast<size_t>(p.numel()) * p.element_size();
    // The first bucket is small (at most 1 MiB), so that communication starts early.
    const size_t cap = buckets_.empty() ? std::min<size_t>(bucket_bytes, 1 << 20) : bucket_bytes;
    if (!cur.params.empty() && (bytes + nbytes > cap || p.scalar_type() != params_[cur.params[0]].scalar_type())) {
      close();
    }
    where_[i] = {buckets_.size(), cur.params.size()};
    cur.params.push_back(i);
    cur.offsets.push_back(offset);
    offset += p.numel();
    bytes += nbytes;
  }
  // The last bucket ends with the flags (without trainable parameters, it holds them alone).
  flags_at_ = offset;
  cur.flat =
      torch::zeros({offset + kFlags}, cur.params.empty() ? torch::TensorOptions(torch::kFloat)
                                                         : params_[cur.params[0]].options().requires_grad(false));
  buckets_.push_back(std::move(cur));
  for (Bucket& b : buckets_) {
    for (size_t i : b.params) hooks_.push_back(params_[i].register_hook([this, i](torch::Tensor g) { OnGrad(i, g); }));
  }
}

GradSync::~GradSync() {
  size_t h = 0;
  for (Bucket& b : buckets_) {
    for (size_t i : b.params) params_[i].remove_hook(hooks_[h++]);
  }
}

void GradSync::Arm(bool sync, const StepFlags& mine) {
  std::lock_guard<std::mutex> lock(mu_);
  armed_ = sync;
  if (!sync) return;
  std::fill(seen_.begin(), seen_.end(), false);
  for (Bucket& b : buckets_) b.pending = b.params.size();
  next_ = 0;
  torch::NoGradGuard no_grad;
  const torch::Tensor flags = buckets_.back().flat.narrow(0, flags_at_, kFlags);
  flags[0].fill_(mine.stop ? 1 : 0);  // fills, not a copy from the host: no wait on a device
  flags[1].fill_(mine.report ? 1 : 0);
}

// The gradient `grad` of this pass plus what .grad accumulated before it is the local
// gradient of the whole optimizer step: it goes into the bucket.
void GradSync::OnGrad(size_t i, const torch::Tensor& grad) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!armed_ || seen_[i]) return;
  seen_[i] = true;
  Bucket& b = buckets_[where_[i].first];
  torch::NoGradGuard no_grad;
  torch::Tensor slot = b.flat.narrow(0, b.offsets[where_[i].second], params_[i].numel());
  const torch::Tensor& before = params_[i].grad();
  slot.copy_(before.defined() ? (before + grad).reshape(-1) : grad.reshape(-1));
  if (--b.pending == 0) StartReady();
}

void GradSync::StartReady() {
  while (next_ < buckets_.size() && buckets_[next_].pending == 0) {
    group_.StartSum(buckets_[next_].flat, "the gradient all-reduce");
    ++next_;
  }
}

Status GradSync::Finish(StepFlags* any) {
  if (any != nullptr) *any = StepFlags();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!armed_) return Status::Ok();
    armed_ = false;
    torch::NoGradGuard no_grad;
    for (Bucket& b : buckets_) {  // parameters this pass did not reach keep their local gradient
      for (size_t s = 0; s < b.params.size(); ++s) {
        const size_t i = b.params[s];
        if (seen_[i]) continue;
        torch::Tensor slot = b.flat.narrow(0, b.offsets[s], params_[i].numel());
        if (params_[i].grad().defined())
          slot.copy_(params_[i].grad().reshape(-1));
        else
          slot.zero_();
        --b.pending;
      }
    }
    StartReady();
  }
  RETURN_IF_ERROR(group_.WaitAll());
  torch::NoGradGuard no_grad;
  const double world = static_cast<double>(group_.world_size());
  for (Bucket& b : buckets_) {
    b.flat.div_(world);
    for (size_t s = 0; s < b.params.size(); ++s) {
      torch::Tensor& p = params_[b.params[s]];
      const torch::Tensor avg = b.flat.narrow(0, b.offsets[s], p.numel()).view(p.sizes());
      if (p.grad().defined())
        p.mutable_grad().copy_(avg);
      else
        p.mutable_grad() = avg.clone();
    }
  }
  if (any != nullptr) {  // averaged: above 0 where any rank set the flag
    const torch::Tensor f = buckets_.back().flat.narrow(0, flags_at_, kFlags).to(torch::kCPU, torch::kDouble);
    any->stop = f[0].item<double>() > 0;
    any->report = f[1].item<double>() > 0;
  }
  return Status::Ok();
}

}  // namespace detail
}  // namespace shardify::trainer
