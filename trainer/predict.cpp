#include <cmath>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>

#include "base/file.h"
#include "format/fields.h"
#include "format/writer.h"
#include "storage/location.h"
#include "trainer/loop_internal.h"
#include "trainer/metrics.h"
#include "trainer/models.h"
#include "trainer/optim.h"
#include "trainer/predict_grid.h"
#include "trainer/train.h"

namespace shardify::trainer {
namespace {

constexpr size_t kMaxWindowBatch = 8;  // volumes: sliding windows per forward pass, at most

struct Predictor {
  std::shared_ptr<const Dataset> ds;
  std::shared_ptr<Model> model;
  CheckpointMeta meta;
  detail::DataSpec spec;
  torch::Device device{torch::kCPU};
  bool labeled = false;
  detail::VolumeLayout volumes;
};

Status OpenPredictor(const PredictOptions& o, Predictor& p) {
  ASSIGN_OR_RETURN(p.meta, ReadCheckpointMeta(o.checkpoint, o.legacy_checkpoint));
  ASSIGN_OR_RETURN(p.device, detail::PickDevice(o.device));
  ReadOptions read;
  read.io = o.io;
  ASSIGN_OR_RETURN(std::unique_ptr<Dataset> ds, Dataset::Open(o.data_dir, read));
  p.ds = std::move(ds);
  if (p.ds->manifest().FindSplit(o.split) == nullptr) {
    return NotFound(storage::ShownLocation(o.data_dir) + ": no split '" + o.split + "'");
  }
  p.spec.segmentation = p.meta.task == "segmentation";
  p.spec.mean = p.meta.mean;
  p.spec.stddev = p.meta.stddev;
  p.spec.resize_h = p.meta.resize_h;
  p.spec.resize_w = p.meta.resize_w;
  p.spec.patch = p.meta.patch;
  p.spec.overlap = p.meta.overlap;
  p.spec.multi_label = p.meta.multi_label;
  p.spec.class_names = p.meta.mask_classes;
  if (o.source_grid && p.spec.patch.empty()) {
    return InvalidArgument("--source-grid maps predicted volumes (unet3d) back; this checkpoint predicts 2D images");
  }
  p.labeled = p.ds->manifest().FindField(p.spec.target_field()) >= 0;
  p.spec.targets = p.labeled;  // without labels the target is all -1 (ignored by the metrics)
  ASSIGN_OR_RETURN(p.model, MakeModel(p.meta.model));
  RETURN_IF_ERROR(LoadCheckpoint(o.checkpoint, *p.model, nullptr, o.legacy_checkpoint));
  p.model->to(p.device);
  p.model->eval();
  return Status::Ok();
}

Result<std::unique_ptr<Loader>> PredictLoader(const PredictOptions& o, const Predictor& p) {
  const size_t batch_size = p.spec.patch.empty() ? std::max<size_t>(o.batch_size, 1) : 1;  // volumes: one at a time
  return detail::SplitLoader(p.ds, o.split, p.spec, batch_size, o.threads);
}

void WriteCsvRows(std::ofstream& out, const Batch& b, const torch::Tensor& logits, const torch::Tensor& labels) {
  torch::Tensor prob = torch::softmax(logits.to(torch::kFloat), 1).to(torch::kCPU).contiguous();
  torch::Tensor lab = labels.to(torch::kCPU).contiguous();
  torch::Tensor arg = prob.argmax(1);
  const int64_t k = prob.size(1);
  for (size_t i = 0; i < b.size(); ++i) {
    out << b.indices[i] << ',' << lab[i].item<int64_t>() << ',' << arg[i].item<int64_t>();
    for (int64_t c = 0; c < k; ++c) out << ',' << std::setprecision(6) << prob[i][c].item<float>();
    out << '\n';
  }
}

// Per sample of a 2D batch: the outputs [B, K, h, w] back at the sample's own size
// sizes[i] (a --resize undone by bilinear interpolation, or the batch padding cropped),
// then hard predictions: u8 [1, H, W] class maps, or multi-label [K, H, W] 0/1.
std::vector<torch::Tensor> SampleMasks(const torch::Tensor& outputs, const std::vector<std::vector<int64_t>>& sizes,
                                       const detail::DataSpec& spec) {
  std::vector<torch::Tensor> out;
  for (size_t i = 0; i < sizes.size(); ++i) {
    torch::Tensor o = outputs.narrow(0, int64_t(i), 1);
    const std::vector<int64_t>& own = sizes[i];
    if (spec.resize_h > 0 && spec.resize_w > 0) {
      if (o.size(2) != own[0] || o.size(3) != own[1]) {
        o = torch::nn::functional::interpolate(
            o, torch::nn::functional::InterpolateFuncOptions().size(own).mode(torch::kBilinear).align_corners(false));
      }
    } else {
      o = o.narrow(2, 0, own[0]).narrow(3, 0, own[1]);
    }
    torch::Tensor pred = detail::Predictions(o, spec, false);
    out.push_back(spec.multi_label ? pred[0] : pred);
  }
  return out;
}

// What the predictions carry over from the source when it has it: `path`, and the geometry
// of its mask (or else of its image) as mask.spacing, mask.origin and mask.direction.
struct Carried {
  int path = -1;
  std::vector<int> geometry;  // source fields, in the order of kGeometrySuffixes
};

Carried FindCarried(const Manifest& m, const detail::DataSpec& spec) {
  Carried c;
  const int path = m.FindField(kPathField);
  if (path >= 0 && m.fields[path].kind == FieldKind::kString) c.path = path;
  for (const std::string& base : {spec.mask_field, spec.image_field}) {
    std::vector<int> g;
    for (const char* suffix : kGeometrySuffixes) {
      const int f = m.FindField(base + suffix);
      if (f >= 0 && m.fields[f].kind == FieldKind::kNdarray && m.fields[f].dtype == DType::kF64) g.push_back(f);
    }
    if (g.size() == kGeometrySuffixes.size()) {
      c.geometry = g;
      break;
    }
  }
  return c;
}

Status AppendCarried(const Dataset& ds, uint64_t index, const Carried& c, Decoder& d, std::vector<FieldValue>* v) {
  if (c.path < 0 && c.geometry.empty()) return Status::Ok();
  ASSIGN_OR_RETURN(SampleView s, ds.Sample(index));
  if (c.path >= 0) {
    ASSIGN_OR_RETURN(std::string_view path, s.bytes_value(static_cast<size_t>(c.path)));
    v->push_back(FieldValue::String(std::string(path)));
  }
  for (int f : c.geometry) {
    ASSIGN_OR_RETURN(Shape shape, s.shape(static_cast<size_t>(f)));
    ASSIGN_OR_RETURN(uint64_t bytes, s.raw_size(static_cast<size_t>(f)));
    std::vector<uint8_t> raw(static_cast<size_t>(bytes));
    RETURN_IF_ERROR(s.Decode(static_cast<size_t>(f), raw.data(), raw.size(), d));
    v->push_back(FieldValue::Array(std::move(raw), shape));
  }
  return Status::Ok();
}

// One sample per mask (u8-able [C, spatial...]) with its carried fields.
Status AppendMasks(DatasetWriter& w, const Batch& b, const std::string& split, const std::vector<torch::Tensor>& masks,
                   const Predictor& p, const Carried& c, Decoder& d) {
  for (size_t i = 0; i < b.size(); ++i) {
    torch::Tensor m = masks[i].to(torch::kCPU).clamp(0, 255).to(torch::kByte).contiguous();
    const uint8_t* src = m.data_ptr<uint8_t>();
    SampleInput s;
    s.split = split;
    s.values.push_back(FieldValue::Int(static_cast<int64_t>(b.indices[i])));
    const Shape shape(m.sizes().begin(), m.sizes().end());
    s.values.push_back(FieldValue::Array(std::vector<uint8_t>(src, src + m.numel()), shape));
    RETURN_IF_ERROR(AppendCarried(*p.ds, b.indices[i], c, d, &s.values));
    RETURN_IF_ERROR(w.Append(std::move(s)));
  }
  return Status::Ok();
}

// Masks carry what FindCarried found; volumes also what PlanVolumes lays out (their
// geometry among it), before the carried fields.
Result<std::unique_ptr<DatasetWriter>> MaskWriter(const PredictOptions& o, Predictor& p, const Carried& c) {
  std::vector<FieldSpec> fields = {{kIndexField, FieldKind::kInt, DType::kI64, {}, {}, {{kMetaRole, kRoleIndex}}}};
  const int64_t channels = p.spec.multi_label ? p.meta.model.num_classes : 1;
  const Shape shape = p.spec.patch.empty() ? Shape{channels, -1, -1} : Shape{channels, -1, -1, -1};
  fields.push_back({kMaskField, FieldKind::kNdarray, DType::kU8, shape, {}, {{kMetaRole, kRoleMask}}});
  if (p.spec.multi_label) {  // the same declaration as the source's (docs/fields.md)
    nlohmann::json labels = nlohmann::json::object();
    for (size_t k = 0; k < p.spec.class_names.size(); ++k) labels[p.spec.class_names[k]] = k;
    if (!labels.empty()) fields.back().meta.push_back({kMetaLabels, labels.dump()});
    fields.back().meta.push_back({kMetaMultiLabel, "true"});
  }
  const Manifest& m = p.ds->manifest();
  if (!p.spec.patch.empty()) {
    p.volumes = detail::PlanVolumes(*p.ds, o.source_grid, &fields);
    p.volumes.multi_label = p.spec.multi_label;
  }
  if (c.path >= 0) fields.push_back({kPathField, FieldKind::kString, DType::kU8, {}, {}, {{kMetaRole, kRolePath}}});
  for (size_t g = 0; g < c.geometry.size(); ++g) {
    fields.push_back({kMaskField + std::string(kGeometrySuffixes[g]),
                      FieldKind::kNdarray,
                      DType::kF64,
                      m.fields[c.geometry[g]].shape,
                      {},
                      {{kMetaRole, kRoleGeometry}}});
  }
  WriterOptions wo;
  wo.classes = p.meta.classes;
  wo.overwrite = true;
  wo.provenance.converter = "shardtrain predict";
  wo.provenance.source = o.checkpoint + " over " + storage::ShownLocation(o.data_dir) + " split " + o.split;
  return DatasetWriter::Create(o.out, std::move(fields), wo);
}

Result<PredictSummary> PredictImpl(const PredictOptions& o) {
  RETURN_IF_ERROR(CheckPredictOptions(o));
  Predictor p;
  RETURN_IF_ERROR(OpenPredictor(o, p));
  ASSIGN_OR_RETURN(std::unique_ptr<Loader> loader, PredictLoader(o, p));
  std::ofstream csv;
  std::unique_ptr<DatasetWriter> writer;
  const std::string csv_tmp = o.out + ".tmp";
  struct RemoveUnlessRenamed {  // a failed run leaves no partial CSV
    std::string path;
    ~RemoveUnlessRenamed() {
      if (!path.empty()) RemoveFile(path).IgnoreError();
    }
  } cleanup;
  Carried carried = FindCarried(p.ds->manifest(), p.spec);
  if (!p.spec.patch.empty()) carried.geometry.clear();  // a volume's comes from PlanVolumes
  Decoder decoder;
  if (p.spec.segmentation) {
    ASSIGN_OR_RETURN(writer, MaskWriter(o, p, carried));
  } else {
    cleanup.path = csv_tmp;
    csv.open(csv_tmp, std::ios::trunc);
    if (!csv) return IOError("cannot create " + csv_tmp);
    csv << "index,label,predicted";
    for (int64_t c = 0; c < p.meta.model.num_classes; ++c) {
      csv << ',' << CsvField("prob_" + (size_t(c) < p.meta.classes.size() ? p.meta.classes[c] : std::to_string(c)));
    }
    csv << '\n';
  }
  const int64_t k = p.meta.model.num_classes;
  ClassMetrics cls(k);
  DiceMetrics dice(k, p.spec.multi_label);
  CaseDiceMetrics case_dice(k, p.spec.multi_label);
  PredictSummary summary;
  torch::NoGradGuard no_grad;
  const std::string where = storage::ShownLocation(o.data_dir) + ", split '" + o.split + "'";
  while (true) {
    ASSIGN_OR_RETURN(std::shared_ptr<Batch> b, loader->Next());
    if (!b) break;
    ASSIGN_OR_RETURN(detail::Inputs in, detail::BatchInputs(b, p.spec, p.device, where));
    if (!p.spec.patch.empty()) {
      // A batch of one case, [1, C, D, H, W]: the case's own shape (no padding).
      const size_t windows = std::min<size_t>(o.batch_size, kMaxWindowBatch);
      const torch::Tensor probs = detail::VolumeProbs(*p.model, in.image[0], p.spec, windows);  // [K, D, H, W]
      if (p.labeled) case_dice.Add(detail::Predictions(probs.unsqueeze(0), p.spec, true), in.target);
      ASSIGN_OR_RETURN(SampleInput s, detail::VolumeSample(*p.ds, p.volumes, b->indices[0], o.split, probs));
      RETURN_IF_ERROR(AppendCarried(*p.ds, b->indices[0], carried, decoder, &s.values));
      RETURN_IF_ERROR(writer->Append(std::move(s)));
      summary.samples += b->size();
      continue;
    }
    // BatchInputs resized each sample from its own size, as in training.
    torch::Tensor logits = p.model->forward(in.image).to(torch::kFloat);
    if (p.spec.segmentation) {
      if (p.labeled) dice.Add(detail::Predictions(logits, p.spec, false), in.target);
      RETURN_IF_ERROR(AppendMasks(*writer, *b, o.split, SampleMasks(logits, in.sizes, p.spec), p, carried, decoder));
    } else {
      cls.Add(logits, in.target);
      WriteCsvRows(csv, *b, logits, in.target);
    }
    summary.samples += b->size();
  }
  if (writer) RETURN_IF_ERROR(writer->Finish());
  if (csv.is_open()) {
    csv.close();
    if (!csv) return IOError("writing predictions to " + csv_tmp);
    RETURN_IF_ERROR(RenameFile(csv_tmp, o.out));
  }
  if (p.labeled && p.spec.segmentation) {
    summary.metrics = {{"dice", p.spec.patch.empty() ? dice.MeanForeground() : case_dice.MeanForeground()}};
  }
  if (p.labeled && !p.spec.segmentation) summary.metrics = {{"accuracy", cls.Accuracy()}, {"auc", cls.MacroAuc()}};
  return summary;
}

}  // namespace

Result<PredictSummary> Predict(const PredictOptions& options) {
  try {
    return PredictImpl(options);
  } catch (const std::exception& e) {
    return detail::FromTorchException(
        "predicting " + storage::ShownLocation(options.data_dir) + " with " + options.checkpoint, e);
  }
}

}  // namespace shardify::trainer
