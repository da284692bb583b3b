#include <cmath>
#include <fstream>
#include <iomanip>

#include "format/file.h"
#include "format/writer.h"
#include "trainer/loop_internal.h"
#include "trainer/metrics.h"
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
  ASSIGN_OR_RETURN(p.meta, ReadCheckpointMeta(o.checkpoint));
  ASSIGN_OR_RETURN(p.device, detail::PickDevice(o.device));
  ReadOptions read;
  read.io = o.io;
  ASSIGN_OR_RETURN(std::unique_ptr<Dataset> ds, Dataset::Open(o.data_dir, read));
  p.ds = std::move(ds);
  if (p.ds->manifest().FindSplit(o.split) == nullptr) {
    return NotFound(o.data_dir + ": no split '" + o.split + "'");
  }
  p.spec.segmentation = p.meta.task == "segmentation";
  p.spec.mean = p.meta.mean;
  p.spec.stddev = p.meta.stddev;
  p.spec.resize_h = p.meta.resize_h;
  p.spec.resize_w = p.meta.resize_w;
  p.spec.patch = p.meta.patch;
  p.spec.overlap = p.meta.overlap;
  if (o.source_grid && p.spec.patch.empty()) {
    return InvalidArgument("--source-grid maps predicted volumes (unet3d) back; this checkpoint predicts 2D images");
  }
  p.labeled = p.ds->manifest().FindField(p.spec.segmentation ? p.spec.mask_field : p.spec.label_field) >= 0;
  ASSIGN_OR_RETURN(p.model, MakeModel(p.meta.model));
  RETURN_IF_ERROR(LoadCheckpoint(o.checkpoint, *p.model, nullptr));
  p.model->to(p.device);
  p.model->eval();
  return Status::Ok();
}

Result<std::unique_ptr<Loader>> PredictLoader(const PredictOptions& o, const Predictor& p) {
  LoaderOptions lo;
  lo.split = o.split;
  lo.fields = {p.spec.image_field};
  if (p.labeled) lo.fields.push_back(p.spec.segmentation ? p.spec.mask_field : p.spec.label_field);
  lo.batch_size = p.spec.patch.empty() ? std::max<size_t>(o.batch_size, 1) : 1;  // volumes: one at a time
  if (!p.spec.patch.empty()) lo.prefetch = 1;
  lo.threads = o.threads;
  lo.sampler.order = SampleOrder::kSequential;
  return Loader::Open(p.ds, lo);
}

// Inputs of a batch; without labels the target is all -1 (ignored by the metrics).
Result<detail::Inputs> PredictInputs(const std::shared_ptr<Batch>& b, const Predictor& p,
                                     const std::string& where) {
  if (p.labeled) return detail::BatchInputs(b, p.spec, p.device, where);
  ASSIGN_OR_RETURN(torch::Tensor img, FieldTensor(b, p.spec.image_field));
  detail::Inputs in;
  in.image = ToFloatImage(ToDevice(img, p.device, b->pinned), b->Find(p.spec.image_field)->dtype,
                          p.spec.mean, p.spec.stddev, p.spec.spatial_rank());
  in.target = torch::full({int64_t(b->size())}, -1, torch::kLong);
  return in;
}

void WriteCsvRows(std::ofstream& out, const Batch& b, const torch::Tensor& logits,
                  const torch::Tensor& labels) {
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

// pred: int64 class maps [B, spatial...] -> one sample per map, mask u8 [1, spatial...].
Status AppendMasks(DatasetWriter& w, const Batch& b, const std::string& split, const torch::Tensor& pred) {
  torch::Tensor m = pred.to(torch::kCPU).clamp(0, 255).to(torch::kByte).contiguous();
  Shape shape = {1};
  for (int64_t d = 1; d < m.dim(); ++d) shape.push_back(m.size(d));
  const size_t n = static_cast<size_t>(m[0].numel());
  for (size_t i = 0; i < b.size(); ++i) {
    const uint8_t* src = m[int64_t(i)].data_ptr<uint8_t>();
    SampleInput s;
    s.split = split;
    s.values.push_back(FieldValue::Int(static_cast<int64_t>(b.indices[i])));
    s.values.push_back(FieldValue::Array(std::vector<uint8_t>(src, src + n), shape));
    RETURN_IF_ERROR(w.Append(std::move(s)));
  }
  return Status::Ok();
}


Result<std::unique_ptr<DatasetWriter>> MaskWriter(const PredictOptions& o, Predictor& p) {
  FieldSpec index{"index", FieldKind::kInt, DType::kI64, {}, {}, {{"role", "index"}}};
  const Shape shape = p.spec.patch.empty() ? Shape{1, -1, -1} : Shape{1, -1, -1, -1};
  FieldSpec mask{"mask", FieldKind::kNdarray, DType::kU8, shape, {}, {{"role", "mask"}}};
  std::vector<FieldSpec> fields = {index, mask};
  if (!p.spec.patch.empty()) p.volumes = detail::PlanVolumes(*p.ds, o.source_grid, &fields);
  WriterOptions wo;
  wo.classes = p.meta.classes;
  wo.overwrite = true;
  wo.provenance.converter = "shardtrain predict";
  wo.provenance.source = o.checkpoint + " over " + o.data_dir + " split " + o.split;
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
  if (p.spec.segmentation) {
    ASSIGN_OR_RETURN(writer, MaskWriter(o, p));
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
  DiceMetrics dice(k);
  CaseDiceMetrics case_dice(k);
  PredictSummary summary;
  torch::NoGradGuard no_grad;
  const std::string where = o.data_dir + ", split '" + o.split + "'";
  while (true) {
    ASSIGN_OR_RETURN(std::shared_ptr<Batch> b, loader->Next());
    if (!b) break;
    ASSIGN_OR_RETURN(detail::Inputs in, PredictInputs(b, p, where));
    if (!p.spec.patch.empty()) {
      // A batch of one case, [1, C, D, H, W]: the case's own shape (no padding).
      const size_t windows = std::min<size_t>(o.batch_size, kMaxWindowBatch);
      torch::Tensor probs = detail::VolumeProbs(*p.model, in.image[0], p.spec, windows);
      if (p.labeled) case_dice.Add(probs.argmax(0).unsqueeze(0), in.target);
      ASSIGN_OR_RETURN(SampleInput s, detail::VolumeSample(*p.ds, p.volumes, b->indices[0], o.split, probs));
      RETURN_IF_ERROR(writer->Append(std::move(s)));
      summary.samples += b->size();
      continue;
    }
    const bool seg_target = p.spec.segmentation && p.labeled;
    ImageMask io = Resize({in.image, seg_target ? in.target : torch::Tensor()}, p.spec.resize_h, p.spec.resize_w);
    torch::Tensor logits = p.model->forward(io.image).to(torch::kFloat);
    if (p.spec.segmentation) {
      torch::Tensor pred = logits.argmax(1);
      if (seg_target) dice.Add(pred, io.mask);
      RETURN_IF_ERROR(AppendMasks(*writer, *b, o.split, pred));
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
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("predicting " + options.data_dir + " with " + options.checkpoint + ": out of memory");
  } catch (const c10::Error& e) {
    return Internal("predicting " + options.data_dir + " with " + options.checkpoint + ": " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    return Internal("predicting " + options.data_dir + " with " + options.checkpoint + ": " + e.what());
  }
}

}  // namespace shardify::trainer
