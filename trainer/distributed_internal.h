// The process group of a distributed run and what Train does with it. Internal: not part
// of the public API (trainer/distributed.h holds the options).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "reader/sampler.h"
#include "trainer/distributed.h"
#include "trainer/metrics.h"
#include "trainer/models.h"
#include "trainer/optim.h"

namespace shardify::trainer {
struct TrainOptions;  // train.h
}

namespace shardify::trainer::detail {

// What the ranks of a run must agree on, as (name, value) pairs in a fixed order: for
// options, the flag and its value ({"--batch", "64"}).
using AgreedValues = std::vector<std::pair<std::string, std::string>>;

// "" when `other`, rank `rank`'s values, equal `first` (rank 0's); else a sentence naming
// the first value that differs and both values, or saying that the two ranks run
// different builds (different names).
std::string Disagreement(const AgreedValues& first, const AgreedValues& other, int rank);

// The build (format version, model table) and every option of `options` that changes what
// a run computes, named by its shardtrain flag; not those a rank may set for itself
// (device, threads, I/O mode, output directory).
AgreedValues AgreedOptions(const TrainOptions& options);

// One rank's membership of a c10d process group: the TCPStore, the backend (Gloo, or NCCL
// for CUDA tensors) and a monitor thread that publishes this rank's heartbeat in the store.
// Every collective is called in the same order on every rank (c10d's rule). A collective
// that fails (a peer died: at once; a peer hangs: after options.timeout_s) returns an
// error that names the rank at fault, found through the store: a rank that reported its
// own error, one whose heartbeat stopped, or one that never reached the collective.
// Thread-safety: StartSum may run on an autograd thread while the owner waits in WaitAll;
// everything else is for the thread that joined.
class RankGroup {
 public:
  // Joins the group described by `options` (world_size >= 2) for tensors on `device`:
  // connects to (or, as rank 0 without an agent store, hosts) the store, waits until every
  // rank has announced itself (an error names those missing after the timeout, and a
  // rank announced twice), then creates the backend.
  static Result<std::unique_ptr<RankGroup>> Join(const DistributedOptions& options, const torch::Device& device);
  ~RankGroup();
  RankGroup(const RankGroup&) = delete;
  RankGroup& operator=(const RankGroup&) = delete;

  int rank() const;
  int world_size() const;
  std::string backend_name() const;

  // Sums each tensor over the ranks, in place (any device; copied to the backend's device
  // and back when it differs). `what` names the collective in errors.
  Status SumInPlace(std::vector<torch::Tensor>& tensors, const std::string& what);
  Result<std::vector<double>> Sum(const std::vector<double>& values, const std::string& what);
  // Copies rank 0's tensors into every rank's.
  Status Broadcast(std::vector<torch::Tensor>& tensors, const std::string& what);
  Status Barrier(const std::string& what);

  // Starts summing `flat` (contiguous, one dtype) over the ranks without waiting; WaitAll
  // then waits for every sum started, in order, and leaves the results in the tensors.
  void StartSum(const torch::Tensor& flat, const std::string& what);
  Status WaitAll();

  // Compares `values` across the ranks through the store (not a collective, whose sizes
  // could then differ): InvalidArgument on every rank saying what differs (Disagreement)
  // when any rank's differ from rank 0's. An error names a rank that stopped (Leave) or
  // did not get here within the timeout.
  Status Agree(const AgreedValues& values);

  // Tells the other ranks why this one stops (they name it in their errors). Call before
  // leaving on an error; a no-op after Finish.
  void Leave(const Status& why);
  // The normal end: a barrier, then the monitor stops. Errors as Barrier.
  Status Finish();

  struct Impl;

 private:
  explicit RankGroup(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// What a rank tells the others at a synchronized step; GradSync::Finish returns each as
// set on any rank.
struct StepFlags {
  bool stop = false;    // this rank was asked to stop (TrainOptions::stop)
  bool report = false;  // this rank's clock asks for a progress report now
};

// Gradient averaging across ranks in buckets (about `bucket_bytes` each, the first at most
// 1 MiB), launched while
// the backward pass still runs: a hook on every parameter copies its gradient into its
// bucket, and a bucket whose gradients are all in starts its all-reduce at once. Buckets
// hold the parameters in reverse order (the order backward produces their gradients) and
// start in bucket order on every rank. The last bucket also carries the StepFlags, so that
// the ranks learn each other's at every synchronized step without a collective of their own.
class GradSync {
 public:
  GradSync(RankGroup& group, std::vector<torch::Tensor> params, size_t bucket_bytes);
  ~GradSync();
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  // Before a backward pass: whether its gradients (plus those accumulated in .grad since
  // the last synchronized pass) are to be averaged (the last micro-batch before an
  // optimizer step). Other passes only accumulate locally, and carry no flags: `mine`
  // counts only when `sync`.
  void Arm(bool sync, const StepFlags& mine = {});
  // After a synchronized backward: starts the buckets not started yet, waits for all and
  // writes the averages into every parameter's .grad; `*any` (when given) gets the flags
  // set on any rank. Ok, nothing done and `*any` all false when not armed. On a CUDA
  // device, reading the flags waits for the all-reduce to end.
  Status Finish(StepFlags* any = nullptr);

 private:
  struct Bucket {
    std::vector<size_t> params;
    std::vector<int64_t> offsets;
    torch::Tensor flat;
    size_t pending = 0;  // gradients not in yet
  };
  void OnGrad(size_t param, const torch::Tensor& grad);
  void StartReady();  // holds mu_

  RankGroup& group_;
  std::vector<torch::Tensor> params_;
  std::vector<std::pair<size_t, size_t>> where_;  // param -> (bucket, slot)
  std::vector<Bucket> buckets_;
  std::vector<unsigned> hooks_;
  std::vector<bool> seen_;
  int64_t flags_at_ = 0;  // offset of the flags in the last bucket
  size_t next_ = 0;       // first bucket not started
  bool armed_ = false;
  std::mutex mu_;
};

// A distributed run's device: "cuda" (or auto finding one) becomes cuda:<local_rank>, made
// the current device. InvalidArgument when this machine has no device for the local rank.
Status RankDevice(const DistributedOptions& options, torch::Device* device);

// Makes every rank's parameters and buffers rank 0's.
Status BroadcastModel(RankGroup& group, Model& model);
// Averages the floating-point buffers (batch-norm running statistics, which each rank
// updates from its own batches) over the ranks.
Status AverageBuffers(RankGroup& group, Model& model);

// Samples of a split of `count` that rank `rank` of `world` really owns: the sampler pads
// each rank's share to equal length by wrapping around, so ranks past the split's end read
// a few samples twice; evaluation counts them once.
uint64_t OwnedSamples(uint64_t count, int rank, int world);

// Combines per-rank metrics into the whole split's, identical on every rank.
Status SumMetrics(RankGroup& group, ClassMetrics* metrics);
Status SumMetrics(RankGroup& group, DiceMetrics* metrics);
Status SumMetrics(RankGroup& group, CaseDiceMetrics* metrics);

// Where a run of `world_size` ranks resumes from a checkpoint. With the checkpoint's own
// world size, exactly where it stopped, and `*note` is empty. With another (a rank's
// batches then differ), at the start of the first epoch it did not finish (the last epoch
// boundary), and `*note` says so; the caller recomputes the schedule step for the new
// number of batches per epoch.
SamplerState ResumePoint(const CheckpointMeta& meta, int world_size, std::string* note);

}  // namespace shardify::trainer::detail
