// The decode pipeline behind Loader: a ring of batch slots filled by a thread pool.
//
// Slots cycle kFree -> kPlanning -> kDecoding -> kReady -> kHeld -> kFree. One worker
// at a time plans the next batch in sequence order (sampler indices, sample lookups,
// padded shapes, buffer sizes) into a free slot; every worker then claims chunks of
// samples of the oldest planned slots and decodes them straight into the slot's
// buffers. The consumer takes slots in sequence order, so the output does not depend
// on the thread count. A handed-out Batch aliases its slot and returns it to the ring
// when its last reference drops; the Ring outlives the Loader while any Batch lives.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "format/dataset.h"
#include "reader/cuda_internal.h"
#include "reader/loader.h"
#include "reader/prefetch_internal.h"
#include "reader/sampler.h"

namespace shardify::detail {

// One loaded field: its place in the schema and how a sample lays out in a slot.
struct FieldPlan {
  size_t index = 0;  // position in manifest().fields
  std::string name;
  FieldKind kind = FieldKind::kNdarray;
  DType dtype = DType::kU8;
  Shape schema;  // ndarray schema shape (-1 = varies)
  bool variable = false;
  bool chunked = false;      // stored as chunks (no single blob)
  bool patch = false;        // filled by the patch sampler (patch mode)
  uint64_t fixed_bytes = 0;  // bytes per sample when not variable (scalars: 8)
};

enum class SlotState { kFree, kPlanning, kDecoding, kReady, kHeld };

struct Slot {
  std::vector<HostBuffer> host;                   // per field
  std::vector<DeviceBuffer> device;               // per field, when staging
  CudaEvent event;                                // when staging: the copy to the device is done
  CudaEvent released;                             // when staging: the consumer's stream is done with it
  bool release_pending = false;                   // `released` was recorded; the next copy waits for it
  bool staged = false;                            // a copy was queued from the host buffers
  std::vector<uint64_t> stride;                   // bytes per sample, per field
  std::vector<SampleView> views;                  // batch_size entries, valid while `pins` holds their shards
  std::vector<std::shared_ptr<const void>> pins;  // the shards of the planned batch, until it is decoded
  Batch batch;
  SlotState state = SlotState::kFree;
  size_t claimed = 0;                // samples handed to workers
  size_t done = 0;                   // samples finished
  size_t error_position = SIZE_MAX;  // batch position of `error` (lowest wins)
  Status error;
  uint64_t flat_step = 0;  // epoch x batches_per_epoch + step (patch draws derive from it)
  AugmentPlan augment;     // the batch's augmentation parameters (LoaderOptions::augment)
};

// A worker's reusable buffers.
struct Scratch {
  std::vector<uint8_t> bytes;                // a padded sample before its copy into the slot
  std::vector<uint8_t> image, label;         // an augmented patch's region, as stored
  std::vector<float> image_in;               // ... as float32, normalized
  std::vector<int32_t> label_in, label_out;  // ... as int32, and augmented
  AugmentScratch augment;
};

class Ring : public std::enable_shared_from_this<Ring> {
 public:
  // A running ring: its slots allocated and `threads` workers started.
  static Result<std::shared_ptr<Ring>> Create(std::shared_ptr<const Dataset> dataset, const LoaderOptions& options,
                                              Sampler sampler, std::vector<FieldPlan> fields, bool pinned,
                                              std::unique_ptr<PatchSampler> patches,
                                              std::shared_ptr<const NnUnetAugment> augment, size_t threads);
  ~Ring();
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;
  // Stops the workers and joins them. Slots held by the consumer stay valid.
  void Stop();

  Result<std::shared_ptr<Batch>> Next();
  bool WaitForNext(std::chrono::milliseconds timeout);
  SamplerState State() const;
  size_t ring_bytes() const { return ring_bytes_.load(); }
  const Sampler& sampler() const { return sampler_; }
  const Dataset& dataset() const { return *dataset_; }

 private:
  Ring(std::shared_ptr<const Dataset> dataset, const LoaderOptions& options, Sampler sampler,
       std::vector<FieldPlan> fields, bool pinned, std::unique_ptr<PatchSampler> patches,
       std::shared_ptr<const NnUnetAugment> augment);
  // Allocates the slots and starts `threads` workers (once, from Create).
  Status Start(size_t threads);
  // Samples one worker claims at a time.
  size_t ClaimSize(size_t threads) const;
  void Work();
  // Returns a handed-out slot to the ring. In a forked child (another pid) it does
  // nothing: the workers live only in the parent, and the child's copy of mu_ may have
  // been taken by one of them at the fork, so the child must not lock it.
  void Release(size_t slot);
  Result<std::unique_ptr<Slot>> MakeSlot();
  // With mu_ held: Next() can answer without waiting.
  bool ReadyLocked() const;
  // With mu_ held: when the consumer holds every slot, adds one (grow_ring) or says why not.
  Status EnsureSlotLocked();
  // Worker steps; each is entered and left with `lock` held.
  bool TryPlan(std::unique_lock<std::mutex>& lock);
  // Stages a fully decoded slot when asked, then marks it ready.
  void FinishSlot(std::unique_lock<std::mutex>& lock, Slot& slot);
  void MarkReady(Slot& slot);
  bool TryDecode(std::unique_lock<std::mutex>& lock, Decoder& decoder, Scratch& scratch);
  // Runs without the lock on a slot owned by the caller.
  Status Plan(Slot& slot, uint64_t seq);
  Status ShapeField(Slot& slot, size_t f, size_t n);
  // The padded [n, ...] shape of ndarray field f and each sample's shape.
  Status PadShapes(Slot& slot, size_t f, size_t n);
  Status Grow(Slot& slot, size_t f, uint64_t stride);
  // Decodes samples [begin, end) of a slot; on error *bad is the first failing position.
  Status DecodeRun(Slot& slot, size_t begin, size_t end, Decoder& decoder, Scratch& scratch, size_t* bad);
  std::string OutOfMemory(const Slot& slot, size_t position) const;  // the message
  Status DecodeArray(const Slot& slot, size_t f, size_t i, const SampleView& view, uint8_t* dst, Decoder& decoder,
                     Scratch& scratch);
  Status Stage(Slot& slot);
  Status DecodePatch(Slot& slot, size_t position, Decoder& decoder, Scratch& scratch);
  // Reads the patch at `position` with its margin into scratch and augments it into the slot.
  Status AugmentPatch(Slot& slot, size_t position, uint64_t draw, Decoder& decoder, Scratch& scratch);

  const std::shared_ptr<const Dataset> dataset_;
  const LoaderOptions options_;
  const Sampler sampler_;
  const std::vector<FieldPlan> fields_;
  const bool pinned_;
  std::unique_ptr<PatchSampler> patches_;         // patch mode only
  int patch_image_ = -1, patch_label_ = -1;       // their positions in fields_
  std::shared_ptr<const NnUnetAugment> augment_;  // LoaderOptions::augment, or null
  int64_t augment_channels_ = 0;                  // image channels of an augmented patch
  const uint64_t total_;
  // Samples a slot holds: batch_size, or a rank's whole epoch when that is smaller (no
  // batch can be larger, so a huge batch_size allocates only what an epoch fills).
  const size_t capacity_;
  const pid_t pid_;  // the process that started the workers (see Release)
  size_t chunk_ = 1;
  CudaStream stream_;
  std::atomic<size_t> ring_bytes_{0};

  // Planner-only (one planner at a time): the current epoch's order.
  uint64_t order_epoch_ = UINT64_MAX;
  std::vector<uint64_t> epoch_order_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_, ready_cv_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::deque<size_t> in_flight_;  // planned slots, in sequence order
  uint64_t next_plan_ = 0;        // sequence number of the next batch to plan
  uint64_t handed_ = 0;           // batches handed to the consumer
  bool planning_ = false;
  bool stop_ = false;
  Status failed_;
  std::vector<std::thread> threads_;
  std::unique_ptr<ShardPrefetcher> prefetcher_;  // remote datasets: shards fetched ahead of the order
};

}  // namespace shardify::detail
