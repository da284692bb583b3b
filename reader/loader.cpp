#include "reader/loader.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "base/parallel.h"
#include "format/dataset.h"
#include "format/elements.h"
#include "format/fields.h"
#include "reader/cuda_internal.h"
#include "reader/ring_internal.h"

namespace shardify {

bool CudaDeviceAvailable() { return detail::CudaDeviceAnswers(); }

Status StreamWaitForBatch(const Batch& batch, void* cuda_stream) {
  if (batch.device_ready_event == nullptr) return InvalidArgument("loader: the batch was not staged to a device");
  return detail::StreamWaitEvent(cuda_stream, batch.device_ready_event);
}

const BatchField* Batch::Find(const std::string& name) const {
  for (const BatchField& f : fields) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

namespace {

bool Batchable(FieldKind k) { return k == FieldKind::kNdarray || k == FieldKind::kInt || k == FieldKind::kFloat; }

Result<detail::FieldPlan> PlanField(const Manifest& m, size_t index) {
  const FieldSpec& spec = m.fields[index];
  detail::FieldPlan p;
  p.index = index;
  p.name = spec.name;
  p.kind = spec.kind;
  p.dtype = spec.dtype;
  p.schema = spec.shape;
  p.variable = spec.kind == FieldKind::kNdarray && spec.variable_shape();
  p.chunked = spec.kind == FieldKind::kNdarray && spec.chunked();
  if (spec.kind != FieldKind::kNdarray) {
    p.fixed_bytes = 8;
  } else if (!p.variable) {
    ASSIGN_OR_RETURN(p.fixed_bytes, ByteSize(spec.shape, spec.dtype));
  }
  return p;
}

// A field read as patches: [leading axes (channels)..., patch...], fixed per sample; the
// read region (patch and margin), or the patch when augmented (the image then float32).
Status PlanPatch(const PatchOptions& o, bool augmented, detail::FieldPlan* p) {
  const size_t s = o.patch.size();
  if (p->kind != FieldKind::kNdarray || p->schema.size() < s) {
    return InvalidArgument("loader: patch field '" + p->name + "' is not an ndarray of rank >= " + std::to_string(s));
  }
  Shape shape(p->schema.begin(), p->schema.end() - static_cast<ptrdiff_t>(s));
  for (int64_t d : shape) {
    if (d < 0) {
      return InvalidArgument("loader: patch field '" + p->name + "' has a varying channel count " +
                             ShapeToString(p->schema) + "; patches need it fixed");
    }
  }
  const Shape read = augmented ? o.patch : o.ReadShape();
  shape.insert(shape.end(), read.begin(), read.end());
  if (augmented && p->name == o.image_field) p->dtype = DType::kF32;
  p->schema = shape;
  p->variable = false;
  p->patch = true;
  ASSIGN_OR_RETURN(p->fixed_bytes, ByteSize(shape, p->dtype));
  return Status::Ok();
}

Result<std::vector<detail::FieldPlan>> PlanFields(const Manifest& m, std::vector<std::string> names,
                                                  const PatchOptions* patch, bool augmented) {
  std::vector<detail::FieldPlan> plans;
  if (patch != nullptr && names.empty()) {
    names.push_back(patch->image_field);
    if (!patch->label_field.empty()) names.push_back(patch->label_field);
  }
  if (names.empty()) {
    for (size_t i = 0; i < m.fields.size(); ++i) {
      if (!Batchable(m.fields[i].kind)) continue;
      ASSIGN_OR_RETURN(detail::FieldPlan p, PlanField(m, i));
      plans.push_back(std::move(p));
    }
  }
  for (const std::string& name : names) {
    const int i = m.FindField(name);
    if (i < 0) return NotFound("loader: the dataset has no field '" + name + "'");
    if (!Batchable(m.fields[i].kind)) {
      return InvalidArgument(std::string("loader: field '") + name + "' is of kind " + FieldKindName(m.fields[i].kind) +
                             ", which is not batched");
    }
    ASSIGN_OR_RETURN(detail::FieldPlan p, PlanField(m, static_cast<size_t>(i)));
    if (patch != nullptr && (name == patch->image_field || name == patch->label_field)) {
      RETURN_IF_ERROR(PlanPatch(*patch, augmented, &p));
    }
    plans.push_back(std::move(p));
  }
  if (patch != nullptr) {
    const auto has = [&](const std::string& n) {
      return std::any_of(plans.begin(), plans.end(),
                         [&](const detail::FieldPlan& p) { return p.name == n && p.patch; });
    };
    if (!has(patch->image_field) || (!patch->label_field.empty() && !has(patch->label_field))) {
      return InvalidArgument("loader: patch mode needs fields '" + patch->image_field + "'" +
                             (patch->label_field.empty() ? "" : " and '" + patch->label_field + "'") +
                             " among the loaded fields");
    }
  }
  if (plans.empty()) return InvalidArgument("loader: no ndarray, int or float field to load");
  return plans;
}

// The `label` of every sample of the split, read from the shard indices (O(N), no blobs).
Result<std::vector<int64_t>> ReadLabels(const Dataset& d, const SplitInfo& split) {
  const int field = FindLabelField(d.manifest());
  if (field < 0) {
    return InvalidArgument("loader: class-balanced order needs an int field 'label'");
  }
  std::vector<int64_t> labels(split.num_samples);
  for (uint64_t i = 0; i < split.num_samples; ++i) {
    ASSIGN_OR_RETURN(SampleView view, d.Sample(split.first_sample + i));
    ASSIGN_OR_RETURN(labels[i], view.int_value(static_cast<size_t>(field)));
  }
  return labels;
}

// Elements of the leading (channel) axes of a patch field: its schema before the patch axes.
int64_t LeadingElements(const Manifest& m, const std::string& field, size_t patch_rank) {
  const int f = m.FindField(field);
  if (f < 0 || m.fields[f].shape.size() < patch_rank) return 0;  // PlanFields names the problem
  int64_t n = 1;
  for (size_t a = 0; a + patch_rank < m.fields[f].shape.size(); ++a) n *= std::max<int64_t>(m.fields[f].shape[a], 0);
  return n;
}

// LoaderOptions::augment, before the patches are sampled: checks it against the dataset,
// fills in the masked channels and sets the patch margin it needs.
Status PrepareAugment(const Dataset& d, LoaderOptions& o) {
  if (!o.augment) return Status::Ok();
  if (!o.patch) return InvalidArgument("augment needs patch mode (a patch size)");
  PatchOptions& patch = *o.patch;
  LoaderOptions::Augment& a = *o.augment;
  if (!patch.margin.empty()) {
    return InvalidArgument("with augment, patches are read with the augmentation's margin; leave the margin unset");
  }
  if (!std::isfinite(a.mean) || !std::isfinite(a.stddev) || a.stddev <= 0) {
    return InvalidArgument("augment needs a finite mean and a stddev > 0");
  }
  const std::vector<int64_t> spatial(patch.patch.begin(), patch.patch.end());
  a.nnunet.margin = true;
  ASSIGN_OR_RETURN(const NnUnetAugment sized, NnUnetAugment::Create(spatial, a.nnunet));
  patch.margin.assign(sized.margin().begin(), sized.margin().end());
  const Manifest& m = d.manifest();
  const int64_t channels = LeadingElements(m, patch.image_field, spatial.size());
  if (!a.nnunet.mask_image_channels) {
    a.nnunet.mask_image_channels = MaskImageChannels(MetaValue(m.provenance.options, "zscore_region"),
                                                     MetaValue(m.provenance.options, "normalize"), channels);
  }
  for (int64_t c : a.nnunet.mask_image_channels.value_or(std::vector<int64_t>{})) {
    if (c < 0 || c >= channels) {
      return InvalidArgument("augment masks image channel " + std::to_string(c) + " of images of " +
                             std::to_string(channels) + " channel(s)");
    }
  }
  if (!patch.label_field.empty()) {
    if (LeadingElements(m, patch.label_field, spatial.size()) > 1) {
      return InvalidArgument("augment needs one label map per sample; field '" + patch.label_field +
                             "' has several channels");
    }
    const int f = m.FindField(patch.label_field);
    if (f >= 0 && a.nnunet.ignore_label) {
      const DType dtype = m.fields[f].dtype;
      const int64_t label = *a.nnunet.ignore_label;
      std::vector<uint8_t> stored(DTypeSize(dtype));
      ConvertElements(reinterpret_cast<const uint8_t*>(&label), DType::kI64, stored.data(), dtype, 1);
      if (ElementAsDouble(stored.data(), dtype) != static_cast<double>(label)) {
        return InvalidArgument("augment's ignore label " + std::to_string(label) + " does not fit field '" +
                               patch.label_field + "' of dtype " + DTypeName(dtype));
      }
    }
  }
  return Status::Ok();
}

// The augmentation the decode threads apply (null without LoaderOptions::augment): the one
// PrepareAugment checked, outside the labelled data where `patches` pads the labels.
Result<std::shared_ptr<const NnUnetAugment>> MakeAugment(const PatchSampler* patches, LoaderOptions& o) {
  if (!o.augment) return std::shared_ptr<const NnUnetAugment>();
  o.augment->nnunet.label_pad = patches->StoredLabelPad();
  ASSIGN_OR_RETURN(
      NnUnetAugment made,
      NnUnetAugment::Create(std::vector<int64_t>(o.patch->patch.begin(), o.patch->patch.end()), o.augment->nnunet));
  return std::shared_ptr<const NnUnetAugment>(std::make_shared<const NnUnetAugment>(std::move(made)));
}

Status CheckOptions(const LoaderOptions& o) {
  if (o.batch_size == 0) return InvalidArgument("loader: batch_size must be >= 1");
  if (o.prefetch == 0) return InvalidArgument("loader: prefetch must be >= 1");
  if (o.prefetch > 1024) return InvalidArgument("loader: prefetch must be <= 1024");
  if (o.stage_to_device && !detail::CudaDeviceAnswers()) {
    return Unsupported("loader: stage_to_device needs a CUDA device, and none answers");
  }
  return Status::Ok();
}

class LoaderImpl final : public Loader {
 public:
  explicit LoaderImpl(std::shared_ptr<detail::Ring> ring) : ring_(std::move(ring)) {}
  ~LoaderImpl() override { ring_->Stop(); }
  Result<std::shared_ptr<Batch>> Next() override { return ring_->Next(); }
  bool WaitForNext(std::chrono::milliseconds timeout) override { return ring_->WaitForNext(timeout); }
  SamplerState State() const override { return ring_->State(); }
  uint64_t batches_per_epoch() const override { return ring_->sampler().batches_per_epoch(); }
  const Dataset& dataset() const override { return ring_->dataset(); }
  size_t ring_bytes() const override { return ring_->ring_bytes(); }

 private:
  std::shared_ptr<detail::Ring> ring_;
};

// The most shards of `split` (its shards first..last) that the batches a Loader has in
// flight can hold open at once, for any seed: prefetch + 1 consecutive batches of this
// rank, which span batches x batch_size x world_size positions of the epoch's order (a
// rank takes every world_size-th). In the shuffle and class_balanced orders each sample
// may come from another shard. In order, a run of positions reads from a window of
// window_shards shards (1 in sequential order) at each end and, between them, only shards
// it reads whole, which hold at least as many samples as the same number of the smallest.
uint64_t ShardsInFlight(const Dataset& dataset, size_t first, size_t last, const SplitInfo& split,
                        const LoaderOptions& o) {
  const uint64_t shards = last - first + 1;
  const uint64_t batches = o.prefetch + 1;
  const uint64_t samples = batches * o.batch_size, positions = samples * o.sampler.world_size;
  const SampleOrder order = o.sampler.order;
  if (order == SampleOrder::kShuffle || order == SampleOrder::kClassBalanced) return std::min(shards, samples);
  const uint64_t window = order == SampleOrder::kShardWindowed ? o.sampler.window_shards : 1;
  std::vector<uint64_t> counts;  // samples of each shard inside the split
  for (size_t n = first; n <= last; ++n) {
    const ShardInfo& s = dataset.manifest().shards[n];
    const uint64_t lo = std::max(s.first_sample, split.first_sample);
    const uint64_t hi = std::min(s.first_sample + s.num_samples, split.first_sample + split.num_samples);
    counts.push_back(hi > lo ? hi - lo : 0);
  }
  std::sort(counts.begin(), counts.end());
  uint64_t whole = 0, sum = 0;  // shards that the positions between the two ends can read whole
  while (whole < counts.size() && positions >= 2 && sum + counts[whole] <= positions - 2) sum += counts[whole++];
  return std::min({shards, samples, 2 * window + whole});
}

// A remote dataset's cache must hold what the batches in flight hold (ShardsInFlight):
// refused at open, giving the smallest limit that does, and what else would do.
Status CheckCacheHoldsTheBatches(const Dataset& dataset, const SplitInfo& split, const LoaderOptions& o) {
  const storage::RemoteDataset* remote = dataset.remote();
  if (remote == nullptr || remote->cache() == nullptr || split.num_samples == 0) return Status::Ok();
  const Manifest& m = dataset.manifest();
  const size_t first = dataset.ShardOfSample(split.first_sample);
  const size_t last = dataset.ShardOfSample(split.first_sample + split.num_samples - 1);
  uint64_t largest = 1;
  for (size_t n = first; n <= last; ++n) largest = std::max(largest, m.shards[n].size_bytes);
  const uint64_t limit = remote->cache()->limit(), holds = limit / largest;
  const uint64_t needed = ShardsInFlight(dataset, first, last, split, o);
  if (holds >= needed) return Status::Ok();
  const SampleOrder order = o.sampler.order;
  std::string how = std::to_string(o.prefetch + 1) + " batches of " + std::to_string(o.batch_size) + " (prefetch " +
                    std::to_string(o.prefetch) + " + 1) in " + SampleOrderName(order) + " order";
  if (order == SampleOrder::kShardWindowed) how += " with window_shards " + std::to_string(o.sampler.window_shards);
  if (o.sampler.world_size > 1)
    how += ", rank " + std::to_string(o.sampler.rank) + " of " + std::to_string(o.sampler.world_size);
  std::string other = "a smaller prefetch or batch_size";
  if (order == SampleOrder::kShardWindowed) other += ", fewer window_shards";
  if (order == SampleOrder::kShuffle || order == SampleOrder::kClassBalanced) {
    other += ", or the shard_windowed order with few window_shards";
  }
  return InvalidArgument("loader: " + dataset.dir() + ": the cache limit (" + std::to_string(limit) + " bytes) holds " +
                         std::to_string(holds) + " of its shards of up to " + std::to_string(largest) +
                         " bytes, and the batches in flight (" + how + ") may hold " + std::to_string(needed) +
                         ": the cache limit must be at least " + std::to_string(needed * largest) +
                         " bytes for this loader (more for each process that shares the cache), or read with " + other);
}

}  // namespace

Result<std::unique_ptr<Loader>> Loader::Open(const std::string& dir, LoaderOptions options) {
  ReadOptions read;
  read.verify_checksums = options.verify_checksums;
  read.max_open_shards = options.max_open_shards;
  read.io = options.io;
  read.remote = options.remote;
  ASSIGN_OR_RETURN(std::unique_ptr<Dataset> dataset, Dataset::Open(dir, read));
  return Open(std::shared_ptr<const Dataset>(std::move(dataset)), std::move(options));
}

Result<std::unique_ptr<Loader>> Loader::Open(std::shared_ptr<const Dataset> dataset, LoaderOptions options) {
  if (!dataset) return InvalidArgument("loader: no dataset");
  RETURN_IF_ERROR(CheckOptions(options));
  const Manifest& m = dataset->manifest();
  const SplitInfo* split = m.FindSplit(options.split);
  if (split == nullptr) {
    return NotFound("loader: " + dataset->dir() + " has no split '" + options.split + "'");
  }
  const Status checked = PrepareAugment(*dataset, options);
  if (!checked.ok()) return checked.WithContext("loader: " + dataset->dir());
  std::unique_ptr<PatchSampler> patches;
  if (options.patch) {
    Result<std::unique_ptr<PatchSampler>> made = PatchSampler::Create(dataset.get(), *options.patch);
    if (!made.ok()) return made.status().WithContext("loader: " + dataset->dir());
    patches = std::move(made).value();
  }
  Result<std::shared_ptr<const NnUnetAugment>> augment = MakeAugment(patches.get(), options);
  if (!augment.ok()) return augment.status().WithContext("loader: " + dataset->dir());
  ASSIGN_OR_RETURN(
      std::vector<detail::FieldPlan> fields,
      PlanFields(m, options.fields, options.patch ? &*options.patch : nullptr, options.augment.has_value()));
  const Status counts = dataset->CheckSampleCounts(split->first_sample, split->num_samples);
  if (!counts.ok()) return counts.WithContext("loader: split '" + options.split + "'");
  RETURN_IF_ERROR(CheckCacheHoldsTheBatches(*dataset, *split, options));
  std::vector<int64_t> labels;
  if (options.sampler.order == SampleOrder::kClassBalanced) {
    ASSIGN_OR_RETURN(labels, ReadLabels(*dataset, *split));
  }
  std::vector<uint64_t> shard_starts;
  for (const ShardInfo& s : m.shards) shard_starts.push_back(s.first_sample);
  Result<Sampler> sampler = Sampler::Create(options.sampler, split->first_sample, split->num_samples,
                                            options.batch_size, std::move(shard_starts), std::move(labels));
  if (!sampler.ok()) return sampler.status().WithContext("loader: " + dataset->dir());
  size_t threads = options.threads;
  if (threads == 0) threads = CoreCount();
  const bool pinned = options.pin_memory && detail::CudaDeviceAnswers();
  ASSIGN_OR_RETURN(std::shared_ptr<detail::Ring> ring,
                   detail::Ring::Create(std::move(dataset), options, std::move(sampler).value(), std::move(fields),
                                        pinned, std::move(patches), std::move(augment).value(), threads));
  return std::unique_ptr<Loader>(std::make_unique<LoaderImpl>(std::move(ring)));
}

}  // namespace shardify
