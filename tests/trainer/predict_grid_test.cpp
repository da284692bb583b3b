// Predicted volumes mapped back onto their source grid (trainer/predict_grid.h).
#include "trainer/predict_grid.h"

#include <cstring>
#include <string>
#include <vector>

#include "../common/temp_dir.h"
#include "catch_torch.h"
#include "format/dataset.h"
#include "format/elements.h"
#include "format/writer.h"
#include "trainer/train.h"

namespace st = shardify::trainer;
using namespace shardify;

namespace {

std::vector<uint8_t> Bytes(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  return std::vector<uint8_t>(b, b + n);
}

FieldSpec Spec(const std::string& name, FieldKind kind, DType t, Shape shape, const std::string& role,
               Shape chunk = {}) {
  FieldSpec f;
  f.name = name;
  f.kind = kind;
  f.dtype = t;
  f.shape = std::move(shape);
  f.meta = {{"role", role}};
  f.chunk_shape = std::move(chunk);
  return f;
}

const std::vector<double> kSourceSpacing = {0.5, 0.8, 2.0}, kSourceOrigin = {-3, 4, 7},
                          kDirection = {0, 1, 0, -1, 0, 0, 0, 0, 1};

// Cases stored as preprocessing left them: each a crop box of a [12, 14, 10] source,
// resampled along y (box y 9 -> stored 18), with the record and a source header.
Status WritePreprocessed(const std::string& dir, int train, int val) {
  std::vector<FieldSpec> fields = {
      Spec("image", FieldKind::kNdarray, DType::kF32, {1, 6, 18, 8}, "image", {1, 6, 9, 8}),
      Spec("mask", FieldKind::kNdarray, DType::kU8, {1, 6, 18, 8}, "mask", {1, 6, 9, 8}),
      Spec("image.spacing", FieldKind::kNdarray, DType::kF64, {3}, "geometry"),
      Spec("image.origin", FieldKind::kNdarray, DType::kF64, {3}, "geometry"),
      Spec("image.direction", FieldKind::kNdarray, DType::kF64, {9}, "geometry"),
      Spec("image.nifti_header", FieldKind::kBytes, DType::kU8, {}, "nifti_header"),
      Spec("source.shape", FieldKind::kNdarray, DType::kI64, {3}, "source_grid"),
      Spec("source.crop_box", FieldKind::kNdarray, DType::kI64, {2, 3}, "source_grid"),
      Spec("source.spacing", FieldKind::kNdarray, DType::kF64, {3}, "source_grid"),
      Spec("source.origin", FieldKind::kNdarray, DType::kF64, {3}, "source_grid"),
      Spec("source.direction", FieldKind::kNdarray, DType::kF64, {9}, "source_grid"),
      Spec("path", FieldKind::kString, DType::kU8, {}, "path")};
  fields[1].meta.push_back({"labels", "{\"background\": 0, \"blob\": 1}"});
  WriterOptions o;
  o.fsync = false;
  ASSIGN_OR_RETURN(auto w, DatasetWriter::Create(dir, fields, o));
  for (int i = 0; i < train + val; ++i) {
    std::vector<float> img(6 * 18 * 8);
    std::vector<uint8_t> mask(img.size());
    for (size_t k = 0; k < img.size(); ++k) {
      const size_t y = (k / 8) % 18;
      mask[k] = y >= 9 ? 1 : 0;
      img[k] = mask[k] ? 2.0f : -1.0f;
    }
    const std::vector<double> spacing = {0.5, 0.4, 2.0};  // y: 0.8 * 9 / 18
    const int64_t start[3] = {2 + i, 3, 1}, size[3] = {6, 9, 8};
    std::vector<int64_t> box(start, start + 3);
    box.insert(box.end(), size, size + 3);
    const int64_t shape[3] = {12, 14, 10};
    std::vector<uint8_t> header(348, 0);
    header[0] = 92, header[1] = 1;  // sizeof_hdr 348; the rest is what a test can compare
    header[100] = static_cast<uint8_t>(i);
    SampleInput s;
    s.split = i < train ? "train" : "val";
    s.values = {FieldValue::Array(Bytes(img.data(), img.size() * 4), {1, 6, 18, 8}),
                FieldValue::Array(mask, {1, 6, 18, 8}),
                FieldValue::Array(Bytes(spacing.data(), 24), {3}),
                FieldValue::Array(Bytes(kSourceOrigin.data(), 24), {3}),
                FieldValue::Array(Bytes(kDirection.data(), 72), {9}),
                FieldValue::Bytes(header),
                FieldValue::Array(Bytes(shape, 24), {3}),
                FieldValue::Array(Bytes(box.data(), 48), {2, 3}),
                FieldValue::Array(Bytes(kSourceSpacing.data(), 24), {3}),
                FieldValue::Array(Bytes(kSourceOrigin.data(), 24), {3}),
                FieldValue::Array(Bytes(kDirection.data(), 72), {9}),
                FieldValue::String("case_" + std::to_string(i) + ".nii.gz")};
    RETURN_IF_ERROR(w->Append(std::move(s)));
  }
  return w->Finish();
}

std::vector<double> Doubles(const SampleView& s, const Dataset& ds, const std::string& field) {
  const auto f = static_cast<size_t>(ds.manifest().FindField(field));
  REQUIRE(ds.manifest().FindField(field) >= 0);
  Decoder d;
  std::vector<uint8_t> b(*s.raw_size(f));
  REQUIRE(s.Decode(f, b.data(), b.size(), d).ok());
  const DType t = ds.manifest().fields[f].dtype;
  std::vector<double> v(b.size() / DTypeSize(t));
  for (size_t i = 0; i < v.size(); ++i) v[i] = ElementAsDouble(&b[i * DTypeSize(t)], t);
  return v;
}

}  // namespace

TEST_CASE("predict grid: probabilities go back onto the crop box, then into the source shape") {
  testing::TempDir dir;
  REQUIRE(WritePreprocessed(dir / "data", 1, 0).ok());
  auto ds = Dataset::Open(dir / "data");
  REQUIRE(ds.ok());
  std::vector<FieldSpec> fields;
  const st::detail::VolumeLayout layout = st::detail::PlanVolumes(**ds, true, &fields);
  REQUIRE(fields.size() == 4);  // mask.spacing, .origin, .direction, mask.nifti_header
  CHECK(fields[0].name == "mask.spacing");
  CHECK(fields[3].name == "mask.nifti_header");
  // Class 1 where stored y >= 10; the crop box's y c samples stored y (c + 0.5) * 2 - 0.5.
  torch::Tensor one = (torch::arange(18) >= 10).to(torch::kFloat).view({1, 1, 18, 1}).expand({1, 6, 18, 8});
  torch::Tensor probs = torch::cat({1 - one, one}, 0);
  auto s = st::detail::VolumeSample(**ds, layout, 0, "val", probs);
  REQUIRE(s.ok());
  REQUIRE(s->values.size() == 6);
  const FieldValue& mask = s->values[1];
  REQUIRE(mask.shape == Shape{1, 12, 14, 10});
  for (int64_t z = 0; z < 12; ++z)
    for (int64_t y = 0; y < 14; ++y)
      for (int64_t x = 0; x < 10; ++x) {
        const bool in = z >= 2 && z < 8 && y >= 3 && y < 12 && x >= 1 && x < 9;
        const uint8_t want = in && (double(y - 3) + 0.5) * 2 - 0.5 >= 10 ? 1 : 0;
        CHECK(int(mask.bytes[size_t((z * 14 + y) * 10 + x)]) == int(want));
      }
  std::vector<double> spacing(3);
  std::memcpy(spacing.data(), s->values[2].bytes.data(), 24);
  CHECK(spacing == kSourceSpacing);  // the source's grid, not the stored one
  CHECK(s->values[5].bytes.size() == 348);
  fields.clear();
  const auto stored = st::detail::PlanVolumes(**ds, false, &fields);
  CHECK(stored.geometry == "image");
  CHECK(fields.size() == 8);  // the stored grid's geometry and the five source.* fields
}

TEST_CASE("predict grid: shardtrain predict --source-grid writes masks with the source's shape, geometry and header") {
  testing::TempDir dir;
  REQUIRE(WritePreprocessed(dir / "data", 2, 1).ok());
  st::TrainOptions o;
  o.data_dir = dir / "data";
  o.out_dir = dir / "run";
  o.model.name = "unet3d";
  o.model.unet_base_channels = 2;
  o.patch = {4, 8, 8};
  o.batch_size = 2;
  o.epochs = 1;
  o.threads = 2;
  o.seed = 1;
  auto r = st::Train(o);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  st::PredictOptions p;
  p.checkpoint = dir / "run/last.pt";
  p.data_dir = dir / "data";
  p.split = "val";
  p.out = dir / "pred";
  p.source_grid = true;
  auto pr = st::Predict(p);
  INFO(pr.status().ToString());
  REQUIRE(pr.ok());
  auto masks = Dataset::Open(dir / "pred");
  auto data = Dataset::Open(dir / "data");
  REQUIRE(masks.ok());
  REQUIRE(data.ok());
  auto pm = (*masks)->Sample(0);
  auto src = (*data)->Sample(2);
  REQUIRE(pm.ok());
  REQUIRE(src.ok());
  CHECK(*pm->shape(1) == Shape{1, 12, 14, 10});
  CHECK(Doubles(*pm, **masks, "mask.spacing") == Doubles(*src, **data, "source.spacing"));
  CHECK(Doubles(*pm, **masks, "mask.origin") == Doubles(*src, **data, "source.origin"));
  CHECK(Doubles(*pm, **masks, "mask.direction") == Doubles(*src, **data, "source.direction"));
  CHECK(*pm->bytes_value(static_cast<size_t>((*masks)->manifest().FindField("mask.nifti_header"))) ==
        *src->bytes_value(static_cast<size_t>((*data)->manifest().FindField("image.nifti_header"))));
  const int path = (*masks)->manifest().FindField("path");
  REQUIRE(path >= 0);  // each prediction names its case
  CHECK(*pm->bytes_value(static_cast<size_t>(path)) == "case_2.nii.gz");
  p.source_grid = false;
  p.out = dir / "pred2";
  REQUIRE(st::Predict(p).ok());  // on the stored grid, the record travels along
  auto stored = Dataset::Open(dir / "pred2");
  REQUIRE(stored.ok());
  CHECK((*stored)->manifest().FindField("source.crop_box") >= 0);
  CHECK(*(*stored)->Sample(0)->bytes_value(static_cast<size_t>((*stored)->manifest().FindField("path"))) ==
        "case_2.nii.gz");
  CHECK(*(*stored)->Sample(0)->shape(1) == Shape{1, 6, 18, 8});
}
