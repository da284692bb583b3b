#include "trainer/loop_internal.h"

#include <ATen/autocast_mode.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/version.h>

#include <limits>
#include <map>
#include <nlohmann/json.hpp>
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

Status FromTorchException(const std::string& context, const std::exception& e) {
  const auto* torch_error = dynamic_cast<const c10::Error*>(&e);
  std::string what = torch_error != nullptr ? torch_error->what_without_backtrace() : e.what();
  what = what.substr(0, what.find('\n'));
  const bool memory = dynamic_cast<const std::bad_alloc*>(&e) != nullptr ||
                      what.find("can't allocate memory") != std::string::npos ||
                      what.find("out of memory") != std::string::npos;
  if (memory) return ResourceExhausted(context + ": out of memory (" + what + ")");
  return Internal(context + ": " + what);
}

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

Result<Inputs> BatchInputs(const std::shared_ptr<Batch>& batch, const DataSpec& spec, const torch::Device& device,
                           const std::string& where) {
  auto fail = [&](const Status& s) {
    const std::string first = batch->indices.empty() ? "?" : std::to_string(batch->indices[0]);
    return s.WithContext(where + ", batch starting at sample " + first);
  };
  const BatchField* img = batch->Find(spec.image_field);
  if (img == nullptr) return fail(NotFound("no field '" + spec.image_field + "'"));
  const size_t rank = static_cast<size_t>(spec.spatial_rank());
  if (img->shape.size() != rank + 1 && img->shape.size() != rank + 2) {
    return fail(InvalidArgument(
        "field '" + spec.image_field + "' has batch shape " + ShapeToString(img->shape) +
        (rank == 2 ? "; expected [B, C, H, W] or [B, H, W]" : "; expected [B, C, D, H, W] or [B, D, H, W]")));
  }
  Result<torch::Tensor> image = FieldTensor(batch, spec.image_field);
  if (!image.ok()) return fail(image.status());
  Inputs in;
  in.image =
      ToFloatImage(ToDevice(*image, device, batch->pinned), img->dtype, spec.mean, spec.stddev, spec.spatial_rank());
  const std::string& tname = spec.target_field();
  const BatchField* tf = batch->Find(tname);
  const int64_t b = static_cast<int64_t>(batch->size());
  Result<torch::Tensor> target =
      spec.targets ? FieldTensor(batch, tname) : Result<torch::Tensor>(torch::full({b}, -1, torch::kLong));
  if (!target.ok()) return fail(target.status());
  torch::Tensor t = ToDevice(*target, device, batch->pinned);
  if (!spec.targets) {
    in.target = t;
  } else if (spec.multi_label) {
    if (tf->shape.size() != rank + 2) {
      return fail(InvalidArgument("multi-label field '" + tname + "' has batch shape " + ShapeToString(tf->shape) +
                                  "; expected [B, K, spatial...]"));
    }
    in.target = PackLabels(t, tf->dtype);
  } else {
    in.target = spec.segmentation ? ToLabelMap(t, tf->dtype, spec.spatial_rank()) : t.to(torch::kLong);
  }
  if (!spec.patch.empty()) return in;
  for (const Shape& s : img->sample_shapes) in.sizes.push_back({s[s.size() - 2], s.back()});
  const bool maps = spec.segmentation && spec.targets;
  ImageMask io = ResizeEach({in.image, maps ? in.target : torch::Tensor()}, in.sizes, spec.resize_h, spec.resize_w);
  in.image = io.image;
  if (maps) in.target = io.mask;
  return in;
}

torch::Tensor TaskLoss(const torch::Tensor& logits, const torch::Tensor& target, const DataSpec& spec) {
  if (spec.multi_label) return BceDiceLoss(logits, target);
  if (spec.segmentation) return DiceCeLoss(logits, target);
  // Unlabeled samples (-1) are ignored by cross-entropy's default ignore index.
  return ClassificationLoss(logits, target.masked_fill(target < 0, -100));
}

Result<std::unique_ptr<Loader>> SplitLoader(const std::shared_ptr<const Dataset>& ds, const std::string& split,
                                            const DataSpec& spec, size_t batch_size, size_t threads,
                                            const RankGroup* group) {
  LoaderOptions lo;
  lo.split = split;
  lo.fields = {spec.image_field};
  if (spec.targets) lo.fields.push_back(spec.target_field());
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
  w.sigmoid = spec.multi_label;
  return SlidingWindowProbs(model, image, w);
}

torch::Tensor Predictions(const torch::Tensor& outputs, const DataSpec& spec, bool probs) {
  if (spec.multi_label) return outputs > (probs ? 0.5 : 0.0);  // sigmoid(z) > 0.5 <=> z > 0
  return outputs.argmax(1);
}

MaskClasses DescribeMask(const FieldSpec& mask) {
  MaskClasses c;
  std::string flag;
  std::map<int64_t, std::string> by_value;
  std::vector<std::string> others;  // nnU-Net regions: a list of values
  for (const KeyValue& kv : mask.meta) {
    if (kv.key == kMetaMultiLabel) flag = kv.value;
    if (kv.key != kMetaLabels) continue;
    const nlohmann::json j = nlohmann::json::parse(kv.value, nullptr, false);
    if (!j.is_object()) continue;
    for (const auto& [name, value] : j.items()) {
      if (value.is_number_integer() && by_value.emplace(value.get<int64_t>(), name).second) continue;
      others.push_back(name);
    }
  }
  for (const auto& [value, name] : by_value) c.names.push_back(name);
  c.names.insert(c.names.end(), others.begin(), others.end());
  const int64_t k = mask.shape.empty() ? 0 : mask.shape[0];
  const bool numbered = k > 1 && others.empty() && static_cast<int64_t>(by_value.size()) == k &&
                        by_value.begin()->first == 0 && by_value.rbegin()->first == k - 1;
  c.multi_label = flag.empty() ? numbered : flag == "true";
  return c;
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
                    const DataSpec& spec, EvalResult* r) {
  r->metrics.emplace_back(prefix + "_dice", mean_foreground);
  for (size_t c = 0; c < per_class.size(); ++c) {
    const bool named = spec.multi_label && c < spec.class_names.size();
    r->metrics.emplace_back(prefix + "_dice_" + (named ? spec.class_names[c] : std::to_string(c)), per_class[c]);
  }
}

// Calls `visit` with the inputs of each batch of `split` (of `batch_size` samples) that
// holds samples of this rank, cut to those samples, then reports the samples done. With a
// group, the Loader pads each rank's part so that every rank steps equally often: the
// padding is read and dropped. The model runs without gradients, in eval mode, and is back
// in training mode once the split is done.
Status ForEachOwnedBatch(Model& model, const EvalContext& c, const std::string& split, size_t batch_size,
                         const std::function<void(const Inputs&)>& visit) {
  ASSIGN_OR_RETURN(std::unique_ptr<Loader> loader, SplitLoader(c.ds, split, c.spec, batch_size, c.threads, c.group));
  torch::NoGradGuard no_grad;
  model.eval();
  const std::string where = c.ds->dir() + ", split '" + split + "'";
  const uint64_t total = OwnedOf(*c.ds, split, c.group);
  uint64_t done = 0;
  while (true) {
    ASSIGN_OR_RETURN(std::shared_ptr<Batch> batch, loader->Next());
    if (!batch) break;
    const int64_t keep = static_cast<int64_t>(std::min<uint64_t>(batch->size(), total - done));
    if (keep == 0) continue;
    ASSIGN_OR_RETURN(Inputs in, BatchInputs(batch, c.spec, c.device, where));  // resized as in training
    in.image = in.image.narrow(0, 0, keep);
    in.target = in.target.narrow(0, 0, keep);
    if (c.nnunet && c.spec.segmentation) {
      const NnUnetAugmentOptions& o = c.nnunet->options();
      in.target = in.target.masked_fill(OutsideLabelled(in.target, o), o.ignore_label.value_or(0));
    }
    visit(in);
    done += static_cast<uint64_t>(keep);
    if (c.progress) c.progress(done, total);
  }
  model.train();
  return Status::Ok();
}

// Whole volumes one at a time (batch 1), each covered by sliding windows.
Result<EvalResult> EvaluateVolumes(Model& model, const EvalContext& c, const std::string& split,
                                   const std::string& prefix) {
  const auto& [ds, spec, num_classes, device, batch_size, threads, progress, group, nnunet] = c;
  CaseDiceMetrics dice(num_classes, spec.multi_label);
  double loss_sum = 0;
  RETURN_IF_ERROR(ForEachOwnedBatch(model, c, split, 1, [&](const Inputs& in) {
    // A batch of one case has the case's own shape (the Loader pads only to the batch's largest).
    const torch::Tensor image = in.image[0], target = in.target;
    torch::Tensor probs = VolumeProbs(model, image, spec, batch_size).unsqueeze(0);
    loss_sum +=
        (spec.multi_label ? BceDiceFromProbs(probs, target) : DiceCeFromLogProbs(probs.clamp_min(1e-8).log(), target))
            .item<double>();
    dice.Add(Predictions(probs, spec, true), target);
  }));
  if (group != nullptr) {
    ASSIGN_OR_RETURN(const std::vector<double> sum, group->Sum({loss_sum}, "summing the " + prefix + " loss"));
    loss_sum = sum[0];
    RETURN_IF_ERROR(SumMetrics(*group, &dice));
  }
  EvalResult r;
  const uint64_t n = dice.cases();
  r.loss = n ? loss_sum / double(n) : std::numeric_limits<double>::quiet_NaN();
  r.metrics.emplace_back(prefix + "_loss", r.loss);
  AddDiceMetrics(prefix, dice.MeanForeground(), dice.PerClass(), spec, &r);
  return r;
}

}  // namespace

Result<EvalResult> Evaluate(Model& model, const EvalContext& c, const std::string& split, const std::string& prefix) {
  if (!c.spec.patch.empty()) return EvaluateVolumes(model, c, split, prefix);
  const auto& [ds, spec, num_classes, device, batch_size, threads, progress, group, nnunet] = c;
  ClassMetrics cls(num_classes);
  DiceMetrics dice(num_classes, spec.multi_label);
  double loss_sum = 0;
  uint64_t n = 0;
  RETURN_IF_ERROR(ForEachOwnedBatch(model, c, split, batch_size, [&](const Inputs& in) {
    torch::Tensor logits = model.forward(in.image).to(torch::kFloat);
    const int64_t keep = in.image.size(0);
    loss_sum += TaskLoss(logits, in.target, spec).item<double>() * double(keep);
    n += static_cast<uint64_t>(keep);
    if (spec.segmentation)
      dice.Add(Predictions(logits, spec, false), in.target);
    else
      cls.Add(logits, in.target);
  }));
  if (group != nullptr) {
    ASSIGN_OR_RETURN(const std::vector<double> sum,
                     group->Sum({loss_sum, double(n)}, "summing the " + prefix + " loss"));
    loss_sum = sum[0];
    n = static_cast<uint64_t>(sum[1]);
    RETURN_IF_ERROR(spec.segmentation ? SumMetrics(*group, &dice) : SumMetrics(*group, &cls));
  }
  EvalResult r;
  r.loss = n ? loss_sum / double(n) : std::numeric_limits<double>::quiet_NaN();
  r.metrics.emplace_back(prefix + "_loss", r.loss);
  if (spec.segmentation) {
    AddDiceMetrics(prefix, dice.MeanForeground(), dice.PerClass(), spec, &r);
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
