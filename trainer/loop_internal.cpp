#include "trainer/loop_internal.h"

#include <ATen/autocast_mode.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/version.h>

#include <limits>
#include <thread>

#include "trainer/distributed_internal.h"
#include "trainer/metrics.h"
#include "trainer/sliding_window.h"
#include "trainer/transforms.h"

namespace shardify::trainer {
namespace detail {

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define SHARDIFY_AUTOCAST_BY_DEVICE 1
#endif

Status CheckDeviceName(const std::string& name) {
  if (name == "auto") return Status::Ok();
  try {
    const torch::Device d(name);
    if (d.is_cuda() || d.is_cpu()) return Status::Ok();
  } catch (const std::exception&) {
  }
  return InvalidArgument("device '" + name + "': use auto, cpu, cuda or cuda:N");
}

Result<torch::Device> PickDevice(const std::string& name) {
  RETURN_IF_ERROR(CheckDeviceName(name));
  try {
    if (name == "auto") return torch::Device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
    torch::Device d(name);
    if (d.is_cuda() && !torch::cuda::is_available()) return NotFound("device '" + name + "': no CUDA device answers");
    return d;
  } catch (const std::exception& e) {
    return InvalidArgument("device '" + name + "': " + e.what());
  }
}

AutocastScope::AutocastScope(bool enable) {
  if (!enable) return;
  active_ = true;
#ifdef SHARDIFY_AUTOCAST_BY_DEVICE
  previous_ = at::autocast::is_autocast_enabled(at::kCUDA);
  at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
  at::autocast::set_autocast_enabled(at::kCUDA, true);
#else
  previous_ = at::autocast::is_enabled();
  at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
  at::autocast::set_enabled(true);
#endif
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
#ifdef SHARDIFY_AUTOCAST_BY_DEVICE
  at::autocast::set_autocast_enabled(at::kCUDA, previous_);
#else
  at::autocast::set_enabled(previous_);
#endif
  at::autocast::clear_cache();
}

Result<Inputs> BatchInputs(const std::shared_ptr<Batch>& batch, const DataSpec& spec,
                           const torch::Device& device, const std::string& where) {
  auto fail = [&](const Status& s) {
    const std::string first = batch->indices.empty() ? "?" : std::to_string(batch->indices[0]);
    return s.WithContext(where + ", batch starting at sample " + first);
  };
  const BatchField* img = batch->Find(spec.image_field);
  if (img == nullptr) return fail(NotFound("no field '" + spec.image_field + "'"));
  const size_t rank = static_cast<size_t>(spec.spatial_rank());
  if (img->shape.size() != rank + 1 && img->shape.size() != rank + 2) {
    return fail(InvalidArgument("field '" + spec.image_field + "' has batch shape " + ShapeToString(img->shape) +
                                (rank == 2 ? "; expected [B, C, H, W] or [B, H, W]"
                                           : "; expected [B, C, D, H, W] or [B, D, H, W]")));
  }
  Result<torch::Tensor> image = FieldTensor(batch, spec.image_field);
  if (!image.ok()) return fail(image.status());
  Inputs in;
  in.image = ToFloatImage(ToDevice(*image, device, batch->pinned), img->dtype, spec.mean, spec.stddev,
                          spec.spatial_rank());
  const std::string& tname = spec.segmentation ? spec.mask_field : spec.label_field;
  const BatchField* tf = batch->Find(tname);
  Result<torch::Tensor> target = FieldTensor(batch, tname);
  if (!target.ok()) return fail(target.status());
  torch::Tensor t = ToDevice(*target, device, batch->pinned);
  in.target = spec.segmentation ? ToLabelMap(t, tf->dtype, spec.spatial_rank()) : t.to(torch::kLong);
  return in;
}

torch::Tensor TaskLoss(const torch::Tensor& logits, const torch::Tensor& target, bool segmentation) {
  if (segmentation) return DiceCeLoss(logits, target);
  // Unlabeled samples (-1) are ignored by cross-entropy's default ignore index.
  return ClassificationLoss(logits, target.masked_fill(target < 0, -100));
}

Result<std::unique_ptr<Loader>> SplitLoader(const std::shared_ptr<const Dataset>& ds,
                                            const std::string& split, const DataSpec& spec,
                                            size_t batch_size, size_t threads, const RankGroup* group) {
  LoaderOptions lo;
  lo.split = split;
  lo.fields = {spec.image_field, spec.segmentation ? spec.mask_field : spec.label_field};
  lo.batch_size = batch_size;
  lo.threads = threads;
  lo.sampler.order = SampleOrder::kSequential;
  lo.sampler.epochs = 1;
  if (group != nullptr) {
    lo.sampler.rank = static_cast<size_t>(group->rank());
    lo.sampler.world_size = static_cast<size_t>(group->world_size());
  }
  if (!spec.patch.empty()) lo.prefetch = 1;  // whole volumes: keep few in memory
  return Loader::Open(ds, lo);
}

torch::Tensor VolumeProbs(Model& model, const torch::Tensor& image, const DataSpec& spec, size_t batch_size) {
  SlidingWindowOptions w;
  w.patch = spec.patch;
  w.overlap = spec.overlap;
  w.batch = static_cast<int64_t>(std::max<size_t>(batch_size, 1));
  w.pad_value = -spec.mean / (spec.stddev > 0 ? spec.stddev : 1);  // raw 0, as patches are padded
  return SlidingWindowProbs(model, image, w);
}

namespace {

// How many samples of `split` this rank evaluates (all without a group): the Loader pads
// each rank's part by wrapping around, and what lies past that is read twice.
uint64_t OwnedOf(const Dataset& ds, const std::string& split, const RankGroup* group) {
  const SplitInfo* info = ds.manifest().FindSplit(split);
  const uint64_t count = info != nullptr ? info->num_samples : 0;
  return group != nullptr ? OwnedSamples(count, group->rank(), group->world_size()) : count;
}

void AddDiceMetrics(const std::string& prefix, double mean_foreground, const std::vector<double>& per_class,
                    EvalResult* r) {
  r->metrics.emplace_back(prefix + "_dice", mean_foreground);
  for (size_t c = 0; c < per_class.size(); ++c) {
    r->metrics.emplace_back(prefix + "_dice_" + std::to_string(c), per_class[c]);
  }
}

// Whole volumes one at a time (batch 1), each covered by sliding windows.
Result<EvalResult> EvaluateVolumes(Model& model, const std::shared_ptr<const Dataset>& ds,
                                   const std::string& split, const DataSpec& spec, int64_t num_classes,
                                   const torch::Device& device, size_t batch_size, size_t threads,
                                   const std::string& prefix, RankGroup* group) {
  ASSIGN_OR_RETURN(std::unique_ptr<Loader> loader, SplitLoader(ds, split, spec, 1, threads, group));
  torch::NoGradGuard no_grad;
  model.eval();
  CaseDiceMetrics dice(num_classes);
  double loss_sum = 0;
  const std::string where = ds->dir() + ", split '" + split + "'";
  uint64_t owned = OwnedOf(*ds, split, group);
  while (true) {
    ASSIGN_OR_RETURN(std::shared_ptr<Batch> batch, loader->Next());
    if (!batch) break;
    if (owned == 0) continue;
    --owned;
    ASSIGN_OR_RETURN(Inputs in, BatchInputs(batch, spec, device, where));
    // A batch of one case has the case's own shape (the Loader pads only to the batch's largest).
    const torch::Tensor image = in.image[0], target = in.target[0];
    torch::Tensor probs = VolumeProbs(model, image, spec, batch_size);
    loss_sum += DiceCeFromLogProbs(probs.clamp_min(1e-8).log().unsqueeze(0), target.unsqueeze(0)).item<double>();
    dice.Add(probs.argmax(0), target);
  }
  model.train();
  if (group != nullptr) {
    ASSIGN_OR_RETURN(const std::vector<double> sum, group->Sum({loss_sum}, "summing the " + prefix + " loss"));
    loss_sum = sum[0];
    RETURN_IF_ERROR(SumMetrics(*group, &dice));
  }
  EvalResult r;
  const uint64_t n = dice.cases();
  r.loss = n ? loss_sum / double(n) : std::numeric_limits<double>::quiet_NaN();
  r.metrics.emplace_back(prefix + "_loss", r.loss);
  AddDiceMetrics(prefix, dice.MeanForeground(), dice.PerClass(), &r);
  return r;
}

}  // namespace

Result<EvalResult> Evaluate(Model& model, const std::shared_ptr<const Dataset>& ds,
                            const std::string& split, const DataSpec& spec, int64_t num_classes,
                            const torch::Device& device, size_t batch_size, size_t threads,
                            const std::string& prefix, RankGroup* group) {
  if (!spec.patch.empty()) {
    return EvaluateVolumes(model, ds, split, spec, num_classes, device, batch_size, threads, prefix, group);
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Loader> loader, SplitLoader(ds, split, spec, batch_size, threads, group));
  torch::NoGradGuard no_grad;
  model.eval();
  ClassMetrics cls(num_classes);
  DiceMetrics dice(num_classes);
  double loss_sum = 0;
  uint64_t n = 0;
  const std::string where = ds->dir() + ", split '" + split + "'";
  uint64_t owned = OwnedOf(*ds, split, group);
  while (true) {
    ASSIGN_OR_RETURN(std::shared_ptr<Batch> batch, loader->Next());
    if (!batch) break;
    const int64_t keep = static_cast<int64_t>(std::min<uint64_t>(batch->size(), owned));
    if (keep == 0) continue;
    owned -= static_cast<uint64_t>(keep);
    ASSIGN_OR_RETURN(Inputs in, BatchInputs(batch, spec, device, where));
    in.image = in.image.narrow(0, 0, keep);
    in.target = in.target.narrow(0, 0, keep);
    ImageMask io = Resize({in.image, spec.segmentation ? in.target : torch::Tensor()},
                          spec.resize_h, spec.resize_w);
    torch::Tensor target = spec.segmentation ? io.mask : in.target;
    torch::Tensor logits = model.forward(io.image).to(torch::kFloat);
    loss_sum += TaskLoss(logits, target, spec.segmentation).item<double>() * double(keep);
    n += static_cast<uint64_t>(keep);
    if (spec.segmentation) dice.Add(logits.argmax(1), target);
    else cls.Add(logits, target);
  }
  model.train();
  if (group != nullptr) {
    ASSIGN_OR_RETURN(const std::vector<double> sum, group->Sum({loss_sum, double(n)}, "summing the " + prefix + " loss"));
    loss_sum = sum[0];
    n = static_cast<uint64_t>(sum[1]);
    RETURN_IF_ERROR(spec.segmentation ? SumMetrics(*group, &dice) : SumMetrics(*group, &cls));
  }
  EvalResult r;
  r.loss = n ? loss_sum / double(n) : std::numeric_limits<double>::quiet_NaN();
  r.metrics.emplace_back(prefix + "_loss", r.loss);
  if (spec.segmentation) {
    AddDiceMetrics(prefix, dice.MeanForeground(), dice.PerClass(), &r);
  } else {
    r.metrics.emplace_back(prefix + "_accuracy", cls.Accuracy());
    r.metrics.emplace_back(prefix + "_auc", cls.MacroAuc());
  }
  return r;
}

void InFlightBatches::Add(std::shared_ptr<Batch> batch, const torch::Device& device) {
  if (!device.is_cuda() || !batch->pinned) return;  // copies were synchronous
  const c10::impl::DeviceGuardImplInterface* impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
  const c10::Device d = device.has_index() ? device : impl->getDevice();
  c10::Event done(c10::DeviceType::CUDA);
  done.record(impl->getStream(d));
  pending_.emplace_back(std::move(batch), std::move(done));
}

void InFlightBatches::Release(size_t max_pending) {
  while (!pending_.empty()) {
    if (pending_.front().second.query()) {
      pending_.pop_front();
    } else if (pending_.size() > max_pending) {
      std::this_thread::yield();  // the device still reads this batch's host memory
    } else {
      break;
    }
  }
}

}  // namespace detail
}  // namespace shardify::trainer
