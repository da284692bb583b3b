// Loader: shuffled, resumable batches from a shard dataset, decoded by C++ threads into
// a bounded ring of (pinned, when a CUDA device answers) host buffers.
//
//   ASSIGN_OR_RETURN(auto loader, Loader::Open(dir, options));
//   while (true) {
//     ASSIGN_OR_RETURN(std::shared_ptr<Batch> b, loader->Next());
//     if (!b) break;            // the run (options.epochs) is over
//     ... use b->Find("image")->data ...
//   }                           // dropping the last reference recycles the slot
//
// Memory: (prefetch + 1) slots x batch bytes + the shard indices and one epoch's order
// (8 bytes a sample); the slots do not grow with the dataset. A slot holds at most the
// samples of one rank's epoch, so a batch_size beyond that allocates no more.
// Order: batches come out in sampler order whatever the thread count.
// Errors: a sample that fails to decode surfaces from Next() on the caller's thread with
// the sample, its shard file, epoch and step named; every batch before it is delivered
// first. The Loader is then closed: its workers stop and Next() keeps returning that
// error (open a new Loader, e.g. resumed from State(), to go on).
// Thread-safety: Next(), State() and the destructor are for one consumer thread.
// The destructor stops the workers and waits for them; outstanding Batches stay valid
// until released; a Batch may be released on any thread.
// fork(): the workers exist only in the process that opened the Loader. A forked child
// must not use or destroy it (it would wait for threads it does not have); it may drop
// Batches, which then leave their slots alone.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/dataset.h"
#include "format/types.h"
#include "reader/augment.h"
#include "reader/patch_sampler.h"
#include "reader/sampler.h"

namespace shardify {

// True when this build has the CUDA runtime and a device answers at run time: then
// pin_memory gives pinned slots and stage_to_device is accepted.
bool CudaDeviceAvailable();

struct LoaderOptions {
  std::string split = "train";      // which split to read
  std::vector<std::string> fields;  // fields to load; empty = all
  size_t batch_size = 64;
  SamplerOptions sampler;        // order, seed, epochs, rank/world, drop_last
  size_t threads = 0;            // decode threads; 0 = all cores
  size_t prefetch = 4;           // batches decoded ahead of the consumer (>= 1)
  bool verify_checksums = true;  // Open(dir) only; Open(dataset) keeps its ReadOptions
  bool pin_memory = true;        // use cudaHostAlloc when a CUDA device answers
  // Also copy each batch to the device on the Loader's own stream (needs
  // CudaDeviceAvailable(); Open() fails with Unsupported otherwise). The caller must be
  // done with a batch's device memory, queued GPU work included, before releasing it.
  // Open() makes `device` the current CUDA device of the calling thread.
  bool stage_to_device = false;
  int device = 0;              // CUDA device for staging
  size_t max_open_shards = 0;  // Open(dir) only, as verify_checksums (0: AutomaticMaxOpenShards)
  IoMode io = IoMode::kMmap;   // Open(dir) only: how shards are read (see format/dataset.h)
  // Open(dir) only, for an http(s):// dataset: its cache folder, limit and transfers.
  // Open() refuses (InvalidArgument, naming the smallest that does) a cache limit that
  // cannot hold the shards the prefetch + 1 batches in flight may hold, for any seed.
  storage::RemoteOptions remote;
  // When the consumer holds every slot, add a slot instead of failing Next() with
  // ResourceExhausted: memory then grows with the batches the consumer keeps alive (and
  // the added slots stay in the ring). For consumers that cannot bound what they keep.
  bool grow_ring = false;
  // Patch mode (3D training): the image field (and the label field, when set) become
  // random patches of shape [C, patch + 2 * margin...] drawn by a PatchSampler (see
  // patch_sampler.h), the last round(B * foreground_fraction) of each batch forced onto
  // foreground. With `fields` empty, only those fields are loaded. Draws depend only on
  // the seeds and the batch sequence, so batches stay identical for any thread count,
  // and on resume.
  std::optional<PatchOptions> patch;
  // Patch mode only: nnU-Net's training augmentation (reader/augment.h) applied to each
  // patch in the decode threads, on the CPU, so a training loop gets augmented batches
  // without augmenting them itself. Patches are read with the augmentation's margin (leave
  // PatchOptions::margin empty) and come out at the patch size: the image field as float32
  // [C, patch...], its stored values mapped to (x - mean) / stddev first (the padding
  // outside the volume is raw 0: set nnunet.image_pad to -mean / stddev to match it); the
  // label field in its own dtype, with no voxel outside the labelled data left but
  // `nnunet.ignore_label` (nnunet.label_pad is set from PatchOptions::label_pad). Unset
  // nnunet.mask_image_channels are those the dataset's provenance records (MaskImageChannels). Batch
  // (epoch, step) of rank r of W draws its plan as (epoch, step * W + r), as shardtrain
  // does, so batches depend only on the seeds: the same for any thread count, and on resume.
  struct Augment {
    NnUnetAugmentOptions nnunet;  // seed, probabilities, mask mode, ignore label, masked channels
    double mean = 0, stddev = 1;
  };
  std::optional<Augment> augment;
};

// One field of a batch: a contiguous [B, ...] array in the source dtype (ndarray fields,
// variable shapes zero-padded to the batch maximum), or B scalars (int -> i64,
// float -> f64). String and bytes fields are not batched.
struct BatchField {
  std::string name;
  FieldKind kind = FieldKind::kNdarray;
  DType dtype = DType::kU8;
  Shape shape;                       // [B, ...] of the padded array
  std::vector<Shape> sample_shapes;  // each sample's own shape (ndarray)
  void* data = nullptr;              // host memory, 256-byte aligned, pinned when possible
  size_t bytes = 0;
  void* device_data = nullptr;  // when staged: the same bytes on the device
};

struct Batch {
  uint64_t epoch = 0;
  uint64_t step = 0;              // index of the batch within its epoch
  std::vector<uint64_t> indices;  // global sample indices, in batch order
  std::vector<BatchField> fields;
  bool pinned = false;  // host buffers are CUDA pinned memory
  // When staged: a cudaEvent_t recorded after the copy; wait on it before use.
  void* device_ready_event = nullptr;
  // When staged, the consumer may name the cudaStream_t its work on device_data runs on.
  // Releasing the batch then records an event on that stream, and the next copy into this
  // slot waits for it on the device, so a batch may be released right after its work is
  // queued. Null: the caller must finish that work before releasing (see Loader).
  void* consumer_stream = nullptr;
  const BatchField* Find(const std::string& name) const;
  size_t size() const { return indices.size(); }
};

class Loader {
 public:
  // Opens the dataset and starts the workers. Errors: unknown split or field, bad
  // options, or any error opening the dataset.
  static Result<std::unique_ptr<Loader>> Open(const std::string& dir, LoaderOptions options);
  // Same, over a dataset the caller has opened; `dataset` must outlive the Loader.
  static Result<std::unique_ptr<Loader>> Open(std::shared_ptr<const Dataset> dataset, LoaderOptions options);
  virtual ~Loader() = default;

  // The next batch, or nullptr when every epoch is done.
  virtual Result<std::shared_ptr<Batch>> Next() = 0;

  // Waits at most `timeout` until Next() can answer without waiting (a batch, the end, or
  // an error); true when it can. Lets a consumer stay responsive (e.g. to signals).
  virtual bool WaitForNext(std::chrono::milliseconds timeout) = 0;

  // Where the consumer stands: restoring it into a new Loader (LoaderOptions::sampler.resume)
  // yields exactly the batches this one would have produced next.
  virtual SamplerState State() const = 0;

  virtual uint64_t batches_per_epoch() const = 0;
  virtual const Dataset& dataset() const = 0;
  // Bytes of host buffers allocated for the ring: (prefetch + 1) slots x batch bytes
  // (one slot for the batch the consumer holds). A consumer holding every slot gets
  // ResourceExhausted from Next() instead of a deadlock, or a new slot with grow_ring.
  virtual size_t ring_bytes() const = 0;
};

// Makes the CUDA stream `cuda_stream` (a cudaStream_t) wait, on the device, for the copy
// of a staged batch; the host does not block. Unsupported without a device; InvalidArgument
// for a batch that was not staged.
Status StreamWaitForBatch(const Batch& batch, void* cuda_stream);

}  // namespace shardify
