#include "tests/tools/fixtures.h"

#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "convert/decode/idx.h"
#include "format/writer.h"

namespace shardify::tools::test {

namespace fs = std::filesystem;

const std::vector<std::string> kClasses = {"cat", "dog", "bird"};
const char kNiftiPath[] = "/usr/share/doc/insighttoolkit5-examples/examples/Data/KmeansTest_T1UCharRaw.nii.gz";

uint8_t Pixel8(uint64_t i, size_t k) { return static_cast<uint8_t>((i * 37 + k * 11) % 251); }
uint16_t Pixel16(uint64_t i, size_t k) { return static_cast<uint16_t>((i * 4099 + k * 1531) % 65521); }
int64_t LabelOf(uint64_t i) { return i % 7 == 6 ? -1 : static_cast<int64_t>(i % 3); }

namespace {

void Check(const Status& st, const char* what) {
  if (!st.ok()) throw std::runtime_error(std::string(what) + ": " + st.ToString());
}

}  // namespace

FieldSpec Spec(std::string name, FieldKind kind, DType dtype, Shape shape, std::vector<KeyValue> meta) {
  FieldSpec f;
  f.name = std::move(name);
  f.kind = kind;
  f.dtype = dtype;
  f.shape = std::move(shape);
  f.meta = std::move(meta);
  return f;
}

namespace {

std::unique_ptr<DatasetWriter> Create(const std::string& dir, std::vector<FieldSpec> fields, uint64_t shard_bytes,
                                      std::vector<std::string> classes) {
  WriterOptions o;
  o.target_shard_bytes = shard_bytes;
  o.fsync = false;
  o.overwrite = true;
  o.classes = std::move(classes);
  o.provenance.converter = "tools-test";
  o.provenance.converter_version = "0";
  o.provenance.source = "fixtures";
  auto w = DatasetWriter::Create(dir, std::move(fields), o);
  Check(w.status(), "DatasetWriter::Create");
  return std::move(w).value();
}

}  // namespace

void WriteGray8(const std::string& dir) {
  auto w = Create(dir,
                  {Spec("image", FieldKind::kNdarray, DType::kU8, {1, kH8, kW8}, {{"role", "image"}}),
                   Spec("label", FieldKind::kInt), Spec("path", FieldKind::kString)},
                  256, kClasses);
  for (uint64_t i = 0; i < kTrain + kTest; ++i) {
    std::vector<uint8_t> px(kH8 * kW8);
    for (size_t k = 0; k < px.size(); ++k) px[k] = Pixel8(i, k);
    SampleInput s;
    s.split = i < kTrain ? "train" : "test";
    s.values = {FieldValue::Array(px, {1, kH8, kW8}), FieldValue::Int(LabelOf(i)),
                FieldValue::String("img/" + std::to_string(i) + ".png")};
    Check(w->Append(std::move(s)), "Append");
  }
  Check(w->Finish(), "Finish");
}

void WriteRgb16WithMask(const std::string& dir) {
  auto w = Create(dir,
                  {Spec("image", FieldKind::kNdarray, DType::kU16, {3, kH16, kW16}),
                   Spec("mask", FieldKind::kNdarray, DType::kU8, {1, kH16, kW16}, {{"role", "mask"}}),
                   Spec("label", FieldKind::kInt)},
                  1 << 20, kClasses);
  for (uint64_t i = 0; i < kRgbSamples; ++i) {
    std::vector<uint8_t> px(3 * kH16 * kW16 * 2), mask(kH16 * kW16);
    for (size_t k = 0; k < px.size() / 2; ++k) {
      const uint16_t v = Pixel16(i, k);
      std::memcpy(&px[2 * k], &v, 2);
    }
    for (size_t k = 0; k < mask.size(); ++k) mask[k] = static_cast<uint8_t>((k + i) % 3);
    SampleInput s;
    s.values = {FieldValue::Array(px, {3, kH16, kW16}), FieldValue::Array(mask, {1, kH16, kW16}),
                FieldValue::Int(static_cast<int64_t>(i % 3))};
    Check(w->Append(std::move(s)), "Append");
  }
  Check(w->Finish(), "Finish");
}

std::vector<uint8_t> ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

void WriteFile(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw std::runtime_error("cannot write " + path);
}

namespace {

std::vector<uint8_t> Gunzip(const std::string& path) {
  gzFile gz = gzopen(path.c_str(), "rb");
  if (gz == nullptr) throw std::runtime_error("cannot open " + path);
  std::vector<uint8_t> out;
  uint8_t buf[1 << 16];
  int n;
  while ((n = gzread(gz, buf, sizeof buf)) > 0) out.insert(out.end(), buf, buf + n);
  gzclose(gz);
  if (n < 0) throw std::runtime_error("cannot decompress " + path);
  return out;
}

template <typename T>
T At(const std::vector<uint8_t>& b, size_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof v);
  return v;
}

}  // namespace

// Reads a little-endian single-file NIfTI-1 header by hand (the tests' own parser, kept
// independent of tools/nifti.cpp). Geometry: pixdim spacing, qoffset origin, identity.
NiftiSource ReadNiftiSource(const std::string& path) {
  NiftiSource s;
  s.file = Gunzip(path);
  if (s.file.size() < 352 || At<int32_t>(s.file, 0) != 348) throw std::runtime_error("not NIfTI-1 LE: " + path);
  s.header.assign(s.file.begin(), s.file.begin() + 348);
  const int16_t rank = At<int16_t>(s.file, 40);
  if (rank != 3 || At<int16_t>(s.file, 70) != 4) throw std::runtime_error("expected a 3D int16 volume: " + path);
  s.shape = {1, At<int16_t>(s.file, 46), At<int16_t>(s.file, 44), At<int16_t>(s.file, 42)};
  s.vox_offset = static_cast<size_t>(At<float>(s.file, 108));
  for (int i = 0; i < 3; ++i) {
    s.spacing.push_back(At<float>(s.file, 80 + 4 * i));
    s.origin.push_back(At<float>(s.file, 268 + 4 * i));
  }
  s.direction = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  return s;
}

void WriteVolume(const std::string& dir, const NiftiSource& src, const Shape& chunk) {
  FieldSpec image = Spec("image", FieldKind::kNdarray, src.dtype, src.shape, {{"role", "image"}});
  image.chunk_shape = chunk;
  auto w = Create(dir,
                  {image, Spec("image.spacing", FieldKind::kNdarray, DType::kF64, {3}, {{"role", "geometry"}}),
                   Spec("image.origin", FieldKind::kNdarray, DType::kF64, {3}, {{"role", "geometry"}}),
                   Spec("image.direction", FieldKind::kNdarray, DType::kF64, {9}, {{"role", "geometry"}}),
                   Spec("image.nifti_header", FieldKind::kBytes, DType::kU8, {}, {{"role", "nifti_header"}}),
                   Spec("label", FieldKind::kInt)},
                  256 << 20, {"brain"});
  auto f64 = [](const std::vector<double>& v) {
    std::vector<uint8_t> b(v.size() * 8);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  SampleInput s;
  s.values = {FieldValue::Array(std::vector<uint8_t>(src.file.begin() + src.vox_offset, src.file.end()), src.shape),
              FieldValue::Array(f64(src.spacing), {3}),
              FieldValue::Array(f64(src.origin), {3}),
              FieldValue::Array(f64(src.direction), {9}),
              FieldValue::Bytes(src.header),
              FieldValue::Int(0)};
  Check(w->Append(std::move(s)), "Append");
  Check(w->Finish(), "Finish");
}

const char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

Mnist ReadFashionMnist(size_t n) {
  const Result<convert::IdxArray> images =
      convert::ReadIdx(std::string(kFashionMnistDir) + "/t10k-images-idx3-ubyte.gz");
  const Result<convert::IdxArray> labels =
      convert::ReadIdx(std::string(kFashionMnistDir) + "/t10k-labels-idx1-ubyte.gz");
  Check(images.status(), "ReadIdx");
  Check(labels.status(), "ReadIdx");
  if (images->data.size() < n * 784 || labels->data.size() < n) throw std::runtime_error("short idx files");
  Mnist m;
  for (size_t i = 0; i < n; ++i) {
    m.images.emplace_back(images->data.begin() + i * 784, images->data.begin() + (i + 1) * 784);
    m.labels.push_back(labels->data[i]);
  }
  return m;
}

void WriteFashionMnist(const std::string& dir, const Mnist& data, bool dictionary) {
  auto w = Create(
      dir,
      {Spec("image", FieldKind::kNdarray, DType::kU8, {1, 28, 28}, {{"role", "image"}}),
       Spec("label", FieldKind::kInt)},
      64 << 10,
      {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"});
  if (dictionary) Check(w->TrainDictionary("image", data.images, 4096), "TrainDictionary");
  for (size_t i = 0; i < data.images.size(); ++i) {
    SampleInput s;
    s.split = "test";
    s.values = {FieldValue::Array(data.images[i], {1, 28, 28}), FieldValue::Int(data.labels[i])};
    Check(w->Append(std::move(s)), "Append");
  }
  Check(w->Finish(), "Finish");
}

}  // namespace shardify::tools::test
