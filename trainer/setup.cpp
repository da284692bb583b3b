#include <filesystem>

#include "base/file.h"
#include "base/strings.h"
#include "format/fields.h"
#include "format/manifest.h"
#include "storage/location.h"
#include "trainer/optim.h"
#include "trainer/setup_internal.h"
#include "trainer/transforms.h"

namespace shardify::trainer::detail {

namespace {

// Source dtype range as a fallback scale when the manifest has no statistics.
double DefaultScale(DType t) { return t == DType::kU8 ? 255.0 : t == DType::kU16 ? 65535.0 : 1.0; }

Result<int64_t> NumClasses(const Manifest& m, const TrainOptions& o, bool seg) {
  if (o.num_classes > 0) return o.num_classes;
  if (!seg && !m.classes.empty()) return static_cast<int64_t>(m.classes.size());
  if (seg) {
    const int f = m.FindField(o.mask_field);
    const size_t named = f >= 0 ? detail::DescribeMask(m.fields[f]).names.size() : 0;
    if (named > 0) return static_cast<int64_t>(named);
    for (const FieldStats& st : m.stats) {
      if (st.field == o.mask_field && st.count > 0) return static_cast<int64_t>(st.max) + 1;
    }
  }
  return InvalidArgument("cannot tell the number of classes: the manifest lists none; pass --classes N");
}

// Volumes: image [C, D, H, W] with a patch of rank 3 (checked by CheckTrainOptions).
Status DescribeVolume(const TrainOptions& o, const Shape& shape, Setup& s) {
  if (shape.size() != 4) {
    return InvalidArgument(s.ds->dir() + ": field '" + o.image_field + "' has shape " + ShapeToString(shape) +
                           "; model '" + o.model.name + "' needs volumes [C, D, H, W]");
  }
  s.spec.patch = o.patch;
  s.spec.overlap = o.overlap;
  s.model.height = o.patch[1];
  s.model.width = o.patch[2];
  return Status::Ok();
}

// A mask of one channel per class (docs/fields.md) trains one sigmoid per class.
Status DescribeMultiLabel(const TrainOptions& o, Setup& s) {
  const int f = s.ds->manifest().FindField(o.mask_field);
  if (f < 0) return Status::Ok();  // CheckLabeled says so
  const FieldSpec& mask = s.ds->manifest().fields[f];
  const detail::MaskClasses classes = detail::DescribeMask(mask);
  if (!classes.multi_label) return Status::Ok();
  const int64_t k = mask.shape.empty() ? -1 : mask.shape[0];
  if (k < 1 || k > kMaxMultiLabels || k != s.model.num_classes) {
    return InvalidArgument(s.ds->dir() + ": multi-label field '" + o.mask_field + "' has shape " +
                           ShapeToString(mask.shape) + " for " + std::to_string(s.model.num_classes) +
                           " classes; one channel per class (1.." + std::to_string(kMaxMultiLabels) + ") is needed");
  }
  s.spec.multi_label = true;
  s.spec.class_names = classes.names;
  return Status::Ok();
}

Status DescribeData(const TrainOptions& o, Setup& s) {
  const Manifest& m = s.ds->manifest();
  const int f = m.FindField(o.image_field);
  if (f < 0 || m.fields[f].kind != FieldKind::kNdarray) {
    return NotFound(s.ds->dir() + ": no ndarray field '" + o.image_field + "'");
  }
  const Shape& shape = m.fields[f].shape;
  s.model = o.model;
  if (IsVolumeModel(o.model.name)) {
    RETURN_IF_ERROR(DescribeVolume(o, shape, s));
    s.model.in_channels = shape[0];
  } else {
    if (shape.size() != 2 && shape.size() != 3) {
      return InvalidArgument(s.ds->dir() + ": field '" + o.image_field + "' has shape " + ShapeToString(shape) +
                             "; 2D images [C, H, W] or [H, W] are supported");
    }
    s.model.in_channels = shape.size() == 3 ? shape[0] : 1;
    s.model.height = o.augment.resize_h > 0 ? o.augment.resize_h
                     : o.augment.crop_h > 0 ? o.augment.crop_h
                                            : shape[shape.size() - 2];
    s.model.width = o.augment.resize_w > 0 ? o.augment.resize_w
                    : o.augment.crop_w > 0 ? o.augment.crop_w
                                           : shape.back();
  }
  if (s.model.in_channels < 1) return InvalidArgument(s.ds->dir() + ": image channel count varies; not supported");
  const ModelInfo* info = FindModel(s.model.name);
  if (info != nullptr && info->fixed_input_size && (s.model.height < 1 || s.model.width < 1)) {
    return InvalidArgument(s.ds->dir() + ": image size varies; model '" + s.model.name + "' needs --resize");
  }
  s.model.height = std::max<int64_t>(s.model.height, 1);
  s.model.width = std::max<int64_t>(s.model.width, 1);
  ASSIGN_OR_RETURN(s.model.num_classes, NumClasses(m, o, s.spec.segmentation));
  if (s.spec.segmentation) RETURN_IF_ERROR(DescribeMultiLabel(o, s));
  s.spec.mean = 0;
  s.spec.stddev = DefaultScale(m.fields[f].dtype);
  for (const FieldStats& st : m.stats) {
    if (st.field == o.image_field && st.count > 0) {
      s.spec.mean = st.mean;
      s.spec.stddev = st.stddev;
    }
  }
  if (o.mean) s.spec.mean = *o.mean;
  if (o.stddev) s.spec.stddev = *o.stddev;
  return Status::Ok();
}

// The masked image channels exist, and an ignore label is one the loss ignores: outside
// [0, classes), or below 0 for packed multi-label values.
Status CheckAugmentMasking(const NnUnetAugmentOptions& a, const Setup& s) {
  for (int64_t c : a.mask_image_channels.value_or(std::vector<int64_t>{})) {
    if (c >= s.model.in_channels) {
      return InvalidArgument("--aug-mask-image: channel " + std::to_string(c) + " of images of " +
                             std::to_string(s.model.in_channels) + " channel(s)");
    }
  }
  const std::optional<int64_t>& label = a.ignore_label;
  const int64_t k = s.model.num_classes;
  if (!label || (s.spec.multi_label ? *label < 0 : *label < 0 || *label >= k)) return Status::Ok();
  return InvalidArgument("--aug-ignore-label " + std::to_string(*label) + " is " +
                         (s.spec.multi_label ? "a set of classes; the loss ignores only negative values"
                                             : "a class; the loss ignores labels outside 0.." + std::to_string(k - 1)));
}

// nnU-Net's augmentation when chosen (by default for segmentation), padding as the
// patches are padded: the image with raw 0, the mask with kLabelPad as the mask stores it.
// The image channels masked outside the labelled data come from the dataset's provenance
// unless given; packed multi-label masks move by nearest neighbour (their values are sets
// of classes, not labels); an ignore label must be one the loss ignores.
Status PrepareAugment(const TrainOptions& o, Setup& s) {
  if (o.aug == AugPreset::kNone || (o.aug == AugPreset::kAuto && !s.spec.segmentation)) return Status::Ok();
  NnUnetAugmentOptions a = o.nnunet;
  a.seed = o.seed;
  a.image_pad = -s.spec.mean / (s.spec.stddev > 0 ? s.spec.stddev : 1);
  a.margin = !s.spec.patch.empty();
  const Manifest& m = s.ds->manifest();
  if (!a.mask_image_channels) {
    a.mask_image_channels = MaskImageChannels(MetaValue(m.provenance.options, "zscore_region"),
                                              MetaValue(m.provenance.options, "normalize"), s.model.in_channels);
  }
  const int f = m.FindField(o.mask_field);
  if (s.spec.segmentation && f >= 0) {
    const DType dtype = m.fields[f].dtype;
    ASSIGN_OR_RETURN(torch::ScalarType type, TorchType(dtype));
    const torch::Tensor pad = torch::full({1}, kLabelPad, torch::kLong).to(type);
    a.label_pad = s.spec.multi_label ? -1 : ToLabelMap(pad, dtype, 0).item<int64_t>();  // packed: -1 is unlabeled
    if (s.spec.multi_label) a.mask_mode = MaskMode::kNearest;
  }
  RETURN_IF_ERROR(CheckAugmentMasking(a, s));
  const std::vector<int64_t> patch = a.margin ? s.spec.patch : std::vector<int64_t>{s.model.height, s.model.width};
  ASSIGN_OR_RETURN(NnUnetAugment aug, NnUnetAugment::Create(patch, a));
  s.nnunet = std::make_shared<const NnUnetAugment>(std::move(aug));
  s.augment_in_loader = s.device.is_cpu() && a.margin && !s.spec.multi_label;
  return Status::Ok();
}

// The training split must have something to learn from: a label >= 0 (classification)
// or a mask with voxels (segmentation) in at least one sample; found at once on any
// labeled split, O(split) index reads (no decoding) on one without.
Status CheckLabeled(const TrainOptions& o, const Setup& s) {
  const Manifest& m = s.ds->manifest();
  const SplitInfo* split = m.FindSplit(o.train_split);
  if (split == nullptr) return NotFound(s.ds->dir() + ": no split '" + o.train_split + "' to train on");
  const std::string& name = s.spec.segmentation ? o.mask_field : o.label_field;
  const int f = m.FindField(name);
  const FieldKind kind = s.spec.segmentation ? FieldKind::kNdarray : FieldKind::kInt;
  if (f < 0 || m.fields[f].kind != kind) {
    return NotFound(s.ds->dir() + ": no " + FieldKindName(kind) + " field '" + name + "' to train on");
  }
  RETURN_IF_ERROR(s.ds->CheckSampleCounts(split->first_sample, split->num_samples));
  for (uint64_t i = split->first_sample; i < split->first_sample + split->num_samples; ++i) {
    ASSIGN_OR_RETURN(SampleView v, s.ds->Sample(i));
    if (s.spec.segmentation) {
      ASSIGN_OR_RETURN(const uint64_t bytes, v.raw_size(static_cast<size_t>(f)));
      if (bytes > 0) return Status::Ok();
    } else {
      ASSIGN_OR_RETURN(const int64_t label, v.int_value(static_cast<size_t>(f)));
      if (label >= 0) return Status::Ok();
    }
  }
  return InvalidArgument(s.ds->dir() + ": split '" + o.train_split + "' has no labels (" +
                         (s.spec.segmentation ? "every mask is empty" : "every '" + name + "' is -1, unlabeled") +
                         "); train on a labeled split (--train-split)");
}

}  // namespace

Status Prepare(const TrainOptions& o, Setup& s) {
  RETURN_IF_ERROR(CheckTrainOptions(o));
  ASSIGN_OR_RETURN(s.device, detail::PickDevice(o.device));
  ReadOptions read;
  read.io = o.io;
  ASSIGN_OR_RETURN(std::unique_ptr<Dataset> ds, Dataset::Open(o.data_dir, read));
  s.ds = std::move(ds);
  s.spec.image_field = o.image_field;
  s.spec.label_field = o.label_field;
  s.spec.mask_field = o.mask_field;
  s.spec.segmentation = IsSegmentationModel(o.model.name);
  s.spec.resize_h = o.augment.resize_h;
  s.spec.resize_w = o.augment.resize_w;
  RETURN_IF_ERROR(DescribeData(o, s));
  RETURN_IF_ERROR(CheckLabeled(o, s));
  RETURN_IF_ERROR(PrepareAugment(o, s));
  s.classes = s.ds->manifest().classes;
  for (const std::string& c : s.classes) {  // they go into every checkpoint's JSON meta
    if (!IsUtf8(c)) {
      return InvalidArgument(storage::ShownLocation(o.data_dir) + ": class name '" + EscapeNonUtf8(c) +
                             "' is not UTF-8, which checkpoints need; rename it and convert again");
    }
  }
  s.has_val = !o.val_split.empty() && s.ds->manifest().FindSplit(o.val_split) != nullptr;
  const std::string main_metric = s.spec.segmentation ? "val_dice" : "val_accuracy";
  s.best_name = !o.best_metric.empty() ? o.best_metric : s.has_val ? main_metric : "train_loss";
  s.curve_metric = HigherIsBetter(s.best_name) ? s.best_name : main_metric;
  if (!o.resume.empty()) {
    ASSIGN_OR_RETURN(s.resumed, ReadCheckpointMeta(o.resume, o.legacy_checkpoint));
    if (!(s.resumed.model.name == s.model.name && s.resumed.model.num_classes == s.model.num_classes &&
          s.resumed.model.in_channels == s.model.in_channels)) {
      return InvalidArgument("checkpoint " + o.resume + " holds model '" + s.resumed.model.name +
                             "' for other data; cannot resume this run from it");
    }
    RETURN_IF_ERROR(CheckResumeOptimizer(o.resume, s.resumed, o.optimizer));
  }
  std::error_code ec;
  std::filesystem::create_directories(o.out_dir, ec);
  if (ec) return IOError("creating output directory " + o.out_dir + ": " + ec.message());
  // Rank 0 writes every output there: one it cannot write to is found now, not after an epoch.
  if (o.dist.rank == 0) {
    const std::string probe = o.out_dir + "/.shardtrain-write-test";
    Result<std::unique_ptr<WritableFile>> file = WritableFile::Create(probe);
    if (!file.ok()) return file.status().WithContext("output directory " + o.out_dir + " is not writable");
    RETURN_IF_ERROR((*file)->Close());
    RETURN_IF_ERROR(RemoveFile(probe));
  }
  return Status::Ok();
}

}  // namespace shardify::trainer::detail
