#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "format/elements.h"
#include "reader/ring_internal.h"

namespace shardify::detail {
namespace {

// Copies a row-major array of shape `in` into the zeroed array of shape `out`
// (out >= in in every dimension) at the same coordinates.
void CopyPadded(const uint8_t* src, uint8_t* dst, const Shape& in, const int64_t* out, size_t axis, size_t elem) {
  if (in.empty()) {
    std::memcpy(dst, src, elem);
    return;
  }
  if (axis + 1 == in.size()) {
    std::memcpy(dst, src, static_cast<size_t>(in[axis]) * elem);
    return;
  }
  size_t in_inner = elem, out_inner = elem;
  for (size_t a = axis + 1; a < in.size(); ++a) {
    in_inner *= static_cast<size_t>(in[a]);
    out_inner *= static_cast<size_t>(out[a]);
  }
  for (int64_t i = 0; i < in[axis]; ++i) {
    CopyPadded(src + i * in_inner, dst + i * out_inner, in, out, axis + 1, elem);
  }
}

std::string Where(const Batch& b) { return "epoch " + std::to_string(b.epoch) + " step " + std::to_string(b.step); }

}  // namespace

Ring::Ring(std::shared_ptr<const Dataset> dataset, const LoaderOptions& options, Sampler sampler,
           std::vector<FieldPlan> fields, bool pinned, std::unique_ptr<PatchSampler> patches,
           std::shared_ptr<const NnUnetAugment> augment)
    : dataset_(std::move(dataset)),
      options_(options),
      sampler_(std::move(sampler)),
      fields_(std::move(fields)),
      pinned_(pinned),
      patches_(std::move(patches)),
      augment_(std::move(augment)),
      total_(sampler_.total_batches()),
      capacity_(static_cast<size_t>(
          std::max<uint64_t>(1, std::min<uint64_t>(options_.batch_size, sampler_.samples_per_rank())))),
      pid_(getpid()) {
  for (size_t f = 0; f < fields_.size() && patches_; ++f) {
    if (!fields_[f].patch) continue;
    if (fields_[f].name == patches_->options().image_field)
      patch_image_ = static_cast<int>(f);
    else
      patch_label_ = static_cast<int>(f);
  }
  if (augment_ && patch_image_ >= 0) {
    const Shape& schema = fields_[static_cast<size_t>(patch_image_)].schema;
    augment_channels_ = 1;
    for (size_t a = 0; a + augment_->patch().size() < schema.size(); ++a) augment_channels_ *= schema[a];
  }
}

Ring::~Ring() { Stop(); }

Result<std::shared_ptr<Ring>> Ring::Create(std::shared_ptr<const Dataset> dataset, const LoaderOptions& options,
                                           Sampler sampler, std::vector<FieldPlan> fields, bool pinned,
                                           std::unique_ptr<PatchSampler> patches,
                                           std::shared_ptr<const NnUnetAugment> augment, size_t threads) {
  std::shared_ptr<Ring> ring(new Ring(std::move(dataset), options, std::move(sampler), std::move(fields), pinned,
                                      std::move(patches), std::move(augment)));
  RETURN_IF_ERROR(ring->Start(threads));
  return ring;
}

size_t Ring::ClaimSize(size_t threads) const {
  // Enough samples for each thread to share a batch; samples of known small size are
  // claimed in runs of about kClaimBytes, since each claim takes the ring's lock twice.
  constexpr uint64_t kClaimBytes = 64 << 10;
  const size_t share = std::clamp<size_t>(capacity_ / (4 * threads), 1, 32);
  uint64_t bytes = 0;
  for (const FieldPlan& f : fields_) {
    if (f.variable || f.chunked || f.patch) return share;
    bytes += f.fixed_bytes;
  }
  const uint64_t run = kClaimBytes / std::max<uint64_t>(bytes, 1);
  return std::clamp<size_t>(static_cast<size_t>(std::min<uint64_t>(run, capacity_)), share,
                            std::max<size_t>(share, capacity_));
}

Status Ring::Start(size_t threads) {
  chunk_ = ClaimSize(threads);
  if (options_.stage_to_device) {
    RETURN_IF_ERROR(CudaSetDevice(options_.device));
    ASSIGN_OR_RETURN(stream_, CudaStream::Create());
  }
  for (size_t k = 0; k < options_.prefetch + 1; ++k) {
    ASSIGN_OR_RETURN(std::unique_ptr<Slot> slot, MakeSlot());
    slots_.push_back(std::move(slot));
  }
  if (const size_t depth = ShardPrefetcher::DepthFor(*dataset_); depth > 0) {
    prefetcher_ = std::make_unique<ShardPrefetcher>(dataset_, sampler_, depth);
  }
  for (size_t t = 0; t < threads; ++t) threads_.emplace_back([this] { Work(); });
  return Status::Ok();
}

Result<std::unique_ptr<Slot>> Ring::MakeSlot() {
  const size_t b = capacity_;
  auto slot = std::make_unique<Slot>();
  slot->host.resize(fields_.size());
  slot->device.resize(fields_.size());
  slot->stride.assign(fields_.size(), 0);
  slot->views.resize(b);
  slot->batch.pinned = pinned_;
  slot->batch.indices.reserve(b);
  slot->batch.fields.resize(fields_.size());
  for (size_t f = 0; f < fields_.size(); ++f) {
    BatchField& bf = slot->batch.fields[f];
    bf.name = fields_[f].name;
    bf.kind = fields_[f].kind;
    bf.dtype = fields_[f].kind == FieldKind::kInt     ? DType::kI64
               : fields_[f].kind == FieldKind::kFloat ? DType::kF64
                                                      : fields_[f].dtype;
    if (!fields_[f].variable) RETURN_IF_ERROR(Grow(*slot, f, fields_[f].fixed_bytes));
  }
  if (options_.stage_to_device) {
    ASSIGN_OR_RETURN(slot->event, CudaEvent::Create());
    ASSIGN_OR_RETURN(slot->released, CudaEvent::Create());
  }
  return slot;
}

void Ring::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  ready_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  prefetcher_.reset();
}

Status Ring::EnsureSlotLocked() {
  if (!in_flight_.empty()) return Status::Ok();
  if (std::any_of(slots_.begin(), slots_.end(), [](const auto& s) { return s->state == SlotState::kFree; })) {
    return Status::Ok();
  }
  if (!options_.grow_ring) {
    return ResourceExhausted("loader: the caller holds all " + std::to_string(slots_.size()) +
                             " batch slots; release a batch or raise prefetch");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Slot> slot, MakeSlot());  // rare: allocates under the lock
  slots_.push_back(std::move(slot));
  work_cv_.notify_one();
  return Status::Ok();
}

bool Ring::ReadyLocked() const {
  if (!failed_.ok() || handed_ == total_ || stop_) return true;
  return !in_flight_.empty() && slots_[in_flight_.front()]->state == SlotState::kReady;
}

bool Ring::WaitForNext(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (ReadyLocked() || !EnsureSlotLocked().ok()) return true;  // Next() reports the error
  return ready_cv_.wait_for(lock, timeout, [this] { return ReadyLocked(); });
}

Result<std::shared_ptr<Batch>> Ring::Next() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!failed_.ok()) return failed_;
  if (handed_ == total_) return std::shared_ptr<Batch>();
  while (in_flight_.empty() || slots_[in_flight_.front()]->state != SlotState::kReady) {
    if (stop_) return Cancelled("loader: stopped");
    RETURN_IF_ERROR(EnsureSlotLocked());
    ready_cv_.wait(lock);
  }
  const size_t k = in_flight_.front();
  in_flight_.pop_front();
  ++handed_;
  Slot& slot = *slots_[k];
  if (!slot.error.ok()) {
    failed_ = slot.error;
    slot.state = SlotState::kFree;
    stop_ = true;
    work_cv_.notify_all();
    return failed_;
  }
  slot.state = SlotState::kHeld;
  std::shared_ptr<Ring> self = shared_from_this();
  return std::shared_ptr<Batch>(&slot.batch, [self, k](Batch*) { self->Release(k); });
}

SamplerState Ring::State() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sampler_.Advance(handed_);
}

void Ring::Release(size_t slot) {
  if (getpid() != pid_) return;  // a forked child: see ring_internal.h
  {
    std::lock_guard<std::mutex> lock(mu_);
    Slot& s = *slots_[slot];
    if (s.batch.consumer_stream != nullptr && options_.stage_to_device) {
      // Without the event the next copy would not wait for the consumer's work: fail instead.
      const Status recorded = RecordEventOn(s.released, s.batch.consumer_stream);
      if (recorded.ok()) {
        s.release_pending = true;
      } else if (failed_.ok()) {
        failed_ = recorded.WithContext("loader: releasing a staged batch");
      }
    }
    s.batch.consumer_stream = nullptr;
    s.state = SlotState::kFree;
  }
  work_cv_.notify_one();
  ready_cv_.notify_all();
}

void Ring::Work() {
  if (options_.stage_to_device) CudaSetDevice(options_.device).IgnoreError();  // checked in Start
  Decoder decoder;
  Scratch scratch;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (TryPlan(lock)) continue;
    if (TryDecode(lock, decoder, scratch)) continue;
    work_cv_.wait(lock);
  }
}

bool Ring::TryPlan(std::unique_lock<std::mutex>& lock) {
  if (planning_ || next_plan_ >= total_) return false;
  auto it = std::find_if(slots_.begin(), slots_.end(), [](const auto& s) { return s->state == SlotState::kFree; });
  if (it == slots_.end()) return false;
  const size_t k = static_cast<size_t>(it - slots_.begin());
  Slot& slot = **it;
  const uint64_t seq = next_plan_++;
  if (prefetcher_) prefetcher_->Planned(seq);
  planning_ = true;
  slot.state = SlotState::kPlanning;
  in_flight_.push_back(k);
  lock.unlock();
  Status status = CatchAllocationFailure([&] { return Plan(slot, seq); },
                                         [&] { return "loader: out of memory planning batch " + std::to_string(seq); });
  lock.lock();
  planning_ = false;
  slot.claimed = 0;
  slot.done = 0;
  slot.error = status;
  slot.error_position = status.ok() ? SIZE_MAX : 0;
  if (status.ok() && !slot.batch.indices.empty()) {
    slot.state = SlotState::kDecoding;
    work_cv_.notify_all();
  } else {
    MarkReady(slot);
  }
  return true;
}

bool Ring::TryDecode(std::unique_lock<std::mutex>& lock, Decoder& decoder, Scratch& scratch) {
  Slot* slot = nullptr;
  for (size_t k : in_flight_) {
    Slot& s = *slots_[k];
    if (s.state == SlotState::kDecoding && s.claimed < s.batch.indices.size()) {
      slot = &s;
      break;
    }
  }
  if (slot == nullptr) return false;
  const size_t n = slot->batch.indices.size();
  const size_t begin = slot->claimed;
  const size_t end = std::min(n, begin + chunk_);
  slot->claimed = end;
  lock.unlock();
  size_t bad = SIZE_MAX;
  const Status status = DecodeRun(*slot, begin, end, decoder, scratch, &bad);
  lock.lock();
  if (!status.ok() && bad < slot->error_position) {
    slot->error = status;
    slot->error_position = bad;
  }
  slot->done += end - begin;
  if (slot->done == n) {
    // Decoded: the views are done with, and the shards may close (the room a remote
    // dataset's cache needs is released now, not when the slot is planned again).
    std::vector<std::shared_ptr<const void>> pins = std::move(slot->pins);
    slot->pins.clear();
    FinishSlot(lock, *slot);
    lock.unlock();
    pins.clear();
    lock.lock();
  }
  return true;
}

void Ring::FinishSlot(std::unique_lock<std::mutex>& lock, Slot& slot) {
  if (slot.error.ok() && options_.stage_to_device) {
    lock.unlock();  // the slot is still kDecoding with nothing left to claim: ours alone
    Status staged = Stage(slot);
    lock.lock();
    if (!staged.ok()) slot.error = staged.WithContext("loader: " + Where(slot.batch));
  }
  MarkReady(slot);
}

void Ring::MarkReady(Slot& slot) {
  slot.state = SlotState::kReady;
  // The consumer waits only for the oldest batch; a later one is taken without waiting.
  if (!in_flight_.empty() && slots_[in_flight_.front()].get() == &slot) ready_cv_.notify_one();
}

Status Ring::Plan(Slot& slot, uint64_t seq) {
  const SamplerState at = sampler_.Advance(seq);
  if (slot.staged) {
    // The host buffers are about to be rewritten: the last copy out of them must be done.
    RETURN_IF_ERROR(WaitEvent(slot.event.get()));
    slot.staged = false;
  }
  if (at.epoch != order_epoch_) {
    epoch_order_ = sampler_.EpochOrder(at.epoch);
    order_epoch_ = at.epoch;
  }
  Batch& batch = slot.batch;
  slot.flat_step = at.epoch * sampler_.batches_per_epoch() + at.step;
  batch.epoch = at.epoch;
  batch.step = at.step;
  sampler_.BatchIndices(epoch_order_, at.step, &batch.indices);
  const size_t n = batch.indices.size();
  if (augment_) {
    const uint64_t draw = at.step * options_.sampler.world_size + options_.sampler.rank;
    slot.augment = augment_->Draw(static_cast<int64_t>(n), augment_channels_, at.epoch, draw);
  }
  slot.pins.clear();  // the previous batch of this slot failed (a decoded one has none)
  const Status found = dataset_->SampleBatch(batch.indices.data(), n, slot.views.data(), &slot.pins);
  if (!found.ok()) return found.WithContext("loader: " + Where(batch));
  for (size_t f = 0; f < fields_.size(); ++f) RETURN_IF_ERROR(ShapeField(slot, f, n));
  batch.device_ready_event = options_.stage_to_device ? slot.event.get() : nullptr;
  return Status::Ok();
}

Status Ring::ShapeField(Slot& slot, size_t f, size_t n) {
  const FieldPlan& plan = fields_[f];
  BatchField& bf = slot.batch.fields[f];
  bf.sample_shapes.resize(n);
  if (plan.patch) {
    bf.shape.assign(1, static_cast<int64_t>(n));
    bf.shape.insert(bf.shape.end(), plan.schema.begin(), plan.schema.end());
    for (Shape& s : bf.sample_shapes) s = plan.schema;
  } else if (plan.kind != FieldKind::kNdarray) {
    bf.shape.assign(1, static_cast<int64_t>(n));
    for (Shape& s : bf.sample_shapes) s.clear();
  } else {
    RETURN_IF_ERROR(PadShapes(slot, f, n));
  }
  uint64_t stride = plan.fixed_bytes;
  if (plan.variable) {
    Shape one(bf.shape.begin() + 1, bf.shape.end());
    ASSIGN_OR_RETURN(stride, ByteSize(one, plan.dtype));
  }
  if (stride > slot.host[f].size() / capacity_) RETURN_IF_ERROR(Grow(slot, f, stride));
  slot.stride[f] = stride;
  bf.data = slot.host[f].data();
  bf.bytes = stride * n;
  bf.device_data = slot.device[f].data();
  return Status::Ok();
}

Status Ring::PadShapes(Slot& slot, size_t f, size_t n) {
  const FieldPlan& plan = fields_[f];
  BatchField& bf = slot.batch.fields[f];
  Shape& padded = bf.shape;
  padded.assign(plan.schema.size() + 1, 0);
  padded[0] = static_cast<int64_t>(n);
  for (size_t i = 0; i < n; ++i) {
    if (plan.variable) {
      Result<Shape> shape = slot.views[i].shape(plan.index);
      if (!shape.ok()) {
        return shape.status().WithContext("loader: " + Where(slot.batch) + ": sample " +
                                          std::to_string(slot.batch.indices[i]));
      }
      if (!ShapeMatches(plan.schema, *shape)) {
        return Corruption("loader: sample " + std::to_string(slot.batch.indices[i]) + " in " +
                          slot.views[i].shard_file() + ": field '" + plan.name + "' has shape " +
                          ShapeToString(*shape) + ", schema " + ShapeToString(plan.schema));
      }
      bf.sample_shapes[i] = *shape;
    } else {
      bf.sample_shapes[i] = plan.schema;
    }
    for (size_t a = 0; a < plan.schema.size(); ++a) padded[a + 1] = std::max(padded[a + 1], bf.sample_shapes[i][a]);
  }
  return Status::Ok();
}

Status Ring::Grow(Slot& slot, size_t f, uint64_t stride) {
  const uint64_t limit = dataset_->options().max_sample_bytes;
  if (stride > limit || stride * capacity_ / capacity_ != stride) {
    return ResourceExhausted("loader: field '" + fields_[f].name + "' needs " + std::to_string(stride) +
                             " bytes per sample, over the limit " + std::to_string(limit));
  }
  const size_t bytes = stride * capacity_;
  const size_t old = slot.host[f].size();
  ASSIGN_OR_RETURN(slot.host[f], HostBuffer::Allocate(bytes, pinned_));
  ring_bytes_ += slot.host[f].size();
  ring_bytes_ -= old;
  if (options_.stage_to_device) {
    slot.device[f] = DeviceBuffer();
    ASSIGN_OR_RETURN(slot.device[f], DeviceBuffer::Allocate(bytes));
  }
  return Status::Ok();
}

Status Ring::DecodeRun(Slot& slot, size_t begin, size_t end, Decoder& decoder, Scratch& scratch, size_t* bad) {
  Status status;
  for (size_t i = begin; i < end && patches_; ++i) {  // patches first, sample by sample
    status = CatchAllocationFailure([&] { return DecodePatch(slot, i, decoder, scratch); },
                                    [&] { return OutOfMemory(slot, i); });
    if (!status.ok()) end = *bad = i;  // later fields need look only before it
  }
  // Field by field, so that a batch of small samples is one tight gather loop per field.
  // A failure at position p ends the run there: the fields after it are still checked for
  // samples before p, so the error is the one a sample-by-sample pass would meet first.
  for (size_t f = 0; f < fields_.size(); ++f) {
    const FieldPlan& plan = fields_[f];
    if (plan.patch || begin >= end) continue;
    uint8_t* host = static_cast<uint8_t*>(slot.host[f].data());
    const size_t stride = slot.stride[f];
    size_t failed = end;
    Status s;
    if (plan.kind != FieldKind::kNdarray || (!plan.variable && !plan.chunked)) {
      size_t at = 0;
      s = CatchAllocationFailure(
          [&] {
            return SampleView::DecodeBatch(&slot.views[begin], end - begin, plan.index, host + begin * stride, stride,
                                           decoder, &at);
          },
          [&] { return OutOfMemory(slot, begin); });
      failed = begin + at;
    } else {
      for (size_t i = begin; i < end && s.ok(); ++i) {
        s = CatchAllocationFailure(
            [&] { return DecodeArray(slot, f, i, slot.views[i], host + i * stride, decoder, scratch); },
            [&] { return OutOfMemory(slot, i); });
        failed = i;
      }
    }
    if (s.ok()) continue;
    const SampleView& view = slot.views[failed];
    status = s.WithContext("loader: " + Where(slot.batch) + ": sample " + std::to_string(view.index()) + " in " +
                           view.shard_file());
    end = *bad = failed;
  }
  return status;
}

std::string Ring::OutOfMemory(const Slot& slot, size_t i) const {
  return "loader: " + Where(slot.batch) + ": out of memory decoding sample " + std::to_string(slot.batch.indices[i]);
}

Status Ring::DecodeArray(const Slot& slot, size_t f, size_t i, const SampleView& view, uint8_t* dst, Decoder& decoder,
                         Scratch& scratch) {
  const FieldPlan& plan = fields_[f];
  // A fixed shape: the shard's index was checked to give every blob exactly its bytes, so
  // the blob decodes straight into the slot (a raw one by a copy and its checksum).
  if (!plan.variable && !plan.chunked) return view.Decode(plan.index, dst, slot.stride[f], decoder);
  const BatchField& bf = slot.batch.fields[f];
  const Shape& shape = bf.sample_shapes[i];
  uint64_t raw_size = 0;
  if (plan.chunked) {
    ASSIGN_OR_RETURN(raw_size, view.raw_size(plan.index));
  } else {
    ASSIGN_OR_RETURN(const BlobInfo blob, view.blob(plan.index));  // allocates nothing
    raw_size = blob.raw_size;
  }
  Result<uint64_t> expected = ByteSize(shape, plan.dtype);
  if (!expected.ok() || raw_size != *expected) {
    return Corruption("field '" + plan.name + "' decodes to " + std::to_string(raw_size) + " bytes, its shape " +
                      ShapeToString(shape) + " needs " +
                      (expected.ok() ? std::to_string(*expected) : std::string("?")));
  }
  const bool padded = plan.variable && !std::equal(shape.begin(), shape.end(), bf.shape.begin() + 1);
  if (!padded) return view.Decode(plan.index, dst, slot.stride[f], decoder);
  if (scratch.bytes.size() < *expected) scratch.bytes.resize(*expected);
  RETURN_IF_ERROR(view.Decode(plan.index, scratch.bytes.data(), scratch.bytes.size(), decoder));
  std::memset(dst, 0, slot.stride[f]);
  CopyPadded(scratch.bytes.data(), dst, shape, bf.shape.data() + 1, 0, DTypeSize(plan.dtype));
  return Status::Ok();
}

Status Ring::DecodePatch(Slot& slot, size_t i, Decoder& decoder, Scratch& scratch) {
  const size_t n = slot.batch.indices.size();
  const uint64_t draw = slot.flat_step * options_.batch_size + i;
  if (augment_) {
    const Status s = AugmentPatch(slot, i, draw, decoder, scratch);
    return s.ok() ? s
                  : s.WithContext("loader: " + Where(slot.batch) + ": sample " + std::to_string(slot.batch.indices[i]));
  }
  auto at = [&](int f) {
    return f < 0 ? nullptr
                 : static_cast<uint8_t*>(slot.host[static_cast<size_t>(f)].data()) +
                       i * slot.stride[static_cast<size_t>(f)];
  };
  const size_t label_bytes = patch_label_ < 0 ? 0 : slot.stride[static_cast<size_t>(patch_label_)];
  const Status s =
      patches_->Sample(slot.batch.indices[i], draw, patches_->Forced(i, n), at(patch_image_),
                       slot.stride[static_cast<size_t>(patch_image_)], at(patch_label_), label_bytes, decoder);
  return s.ok() ? s
                : s.WithContext("loader: " + Where(slot.batch) + ": sample " + std::to_string(slot.batch.indices[i]));
}

Status Ring::AugmentPatch(Slot& slot, size_t i, uint64_t draw, Decoder& decoder, Scratch& scratch) {
  const uint64_t index = slot.batch.indices[i];
  const FieldPlan& image = fields_[static_cast<size_t>(patch_image_)];
  const DType image_dtype = dataset_->manifest().fields[image.index].dtype;
  ASSIGN_OR_RETURN(const uint64_t image_bytes, patches_->ImageBytes(index));
  uint64_t label_bytes = 0;
  if (patch_label_ >= 0) {
    ASSIGN_OR_RETURN(label_bytes, patches_->LabelBytes(index));
  }
  scratch.image.resize(image_bytes);
  scratch.label.resize(label_bytes);
  RETURN_IF_ERROR(patches_->Sample(index, draw, patches_->Forced(i, slot.batch.indices.size()), scratch.image.data(),
                                   scratch.image.size(), patch_label_ < 0 ? nullptr : scratch.label.data(),
                                   scratch.label.size(), decoder));
  const size_t voxels = image_bytes / DTypeSize(image_dtype);
  scratch.image_in.resize(voxels);
  ConvertElements(scratch.image.data(), image_dtype, reinterpret_cast<uint8_t*>(scratch.image_in.data()), DType::kF32,
                  voxels);
  const LoaderOptions::Augment& a = *options_.augment;
  if (a.mean != 0 || a.stddev != 1) {
    const auto mean = static_cast<float>(a.mean), scale = static_cast<float>(1 / a.stddev);
    for (float& x : scratch.image_in) x = (x - mean) * scale;
  }
  int32_t* label_out = nullptr;
  if (patch_label_ >= 0) {
    const FieldPlan& label = fields_[static_cast<size_t>(patch_label_)];
    const size_t n = label_bytes / DTypeSize(label.dtype);
    scratch.label_in.resize(n);
    ConvertElements(scratch.label.data(), label.dtype, reinterpret_cast<uint8_t*>(scratch.label_in.data()), DType::kI32,
                    n);
    scratch.label_out.resize(slot.stride[static_cast<size_t>(patch_label_)] / DTypeSize(label.dtype));
    label_out = scratch.label_out.data();
  }
  auto at = [&](int f) {
    return static_cast<uint8_t*>(slot.host[static_cast<size_t>(f)].data()) + i * slot.stride[static_cast<size_t>(f)];
  };
  RETURN_IF_ERROR(augment_->ApplySample(slot.augment, static_cast<int64_t>(i), augment_channels_,
                                        scratch.image_in.data(), patch_label_ < 0 ? nullptr : scratch.label_in.data(),
                                        reinterpret_cast<float*>(at(patch_image_)), label_out, &scratch.augment));
  if (patch_label_ >= 0) {
    const DType dtype = fields_[static_cast<size_t>(patch_label_)].dtype;
    ConvertElements(reinterpret_cast<const uint8_t*>(label_out), DType::kI32, at(patch_label_), dtype,
                    scratch.label_out.size());
  }
  return Status::Ok();
}

Status Ring::Stage(Slot& slot) {
  if (slot.release_pending) {
    RETURN_IF_ERROR(StreamWaitEvent(stream_.get(), slot.released.get()));
    slot.release_pending = false;
  }
  for (size_t f = 0; f < fields_.size(); ++f) {
    const BatchField& bf = slot.batch.fields[f];
    if (bf.bytes == 0) continue;
    RETURN_IF_ERROR(CopyToDeviceAsync(slot.device[f].data(), bf.data, bf.bytes, stream_));
  }
  slot.staged = true;
  return RecordEvent(slot.event, stream_);
}

}  // namespace shardify::detail
