// reader_idx_fixture: writes an MNIST-style idx pair (plain or .gz) as a shard dataset
// with the field conventions of docs/fields.md, for the loader race when the
// converter is not built. Same pixels as the class-folder PNGs made from the same files.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "convert/decode/idx.h"
#include "format/writer.h"

namespace {

shardify::Status Convert(const std::string& images_path, const std::string& labels_path, const std::string& out,
                         const std::vector<std::string>& classes) {
  using namespace shardify;
  ASSIGN_OR_RETURN(const convert::IdxArray images, convert::ReadIdx(images_path));
  ASSIGN_OR_RETURN(const convert::IdxArray labels, convert::ReadIdx(labels_path));
  if (images.dtype != DType::kU8 || images.shape.size() != 3) return Corruption(images_path + ": not an idx3 u8 file");
  if (labels.dtype != DType::kU8 || labels.shape.size() != 1) return Corruption(labels_path + ": not an idx1 u8 file");
  const uint64_t n = images.shape[0], h = images.shape[1], w = images.shape[2];
  if (labels.shape[0] != images.shape[0]) return Corruption(labels_path + ": count differs");
  const int64_t hh = static_cast<int64_t>(h), ww = static_cast<int64_t>(w);
  std::vector<FieldSpec> fields(3);
  fields[0].name = "image";
  fields[0].shape = {1, hh, ww};
  fields[1].name = "label";
  fields[1].kind = FieldKind::kInt;
  fields[2].name = "path";
  fields[2].kind = FieldKind::kString;
  for (FieldSpec& f : fields) f.meta = {{"role", f.name}};
  WriterOptions o;
  o.fsync = false;
  o.overwrite = true;
  o.classes = classes;
  ASSIGN_OR_RETURN(auto writer, DatasetWriter::Create(out, fields, o));
  for (uint64_t i = 0; i < n; ++i) {
    SampleInput s;
    const uint8_t* p = images.data.data() + i * h * w;
    const int64_t label = labels.data[i];
    s.values.push_back(FieldValue::Array(std::vector<uint8_t>(p, p + h * w), {1, hh, ww}));
    s.values.push_back(FieldValue::Int(label));
    const std::string cls = label < static_cast<int64_t>(classes.size()) ? classes[label] : std::to_string(label);
    s.values.push_back(FieldValue::String(cls + "/" + std::to_string(i) + ".png"));
    RETURN_IF_ERROR(writer->Append(std::move(s)));
  }
  return writer->Finish();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "reader_idx_fixture: write an idx images + labels pair (plain or .gz) as a shard "
      "dataset (fields image u8 [1, H, W], label, path), split 'train'."};
  std::string images, labels, out;
  std::vector<std::string> classes;
  app.add_option("IMAGES", images, "*-images-idx3-ubyte[.gz]")->required();
  app.add_option("LABELS", labels, "*-labels-idx1-ubyte[.gz]")->required();
  app.add_option("-o,--output", out, "dataset directory to write (replaced)")->required();
  app.add_option("--classes", classes, "class names for labels 0, 1, ...")->delimiter(',');
  CLI11_PARSE(app, argc, argv);
  shardify::Status s = Convert(images, labels, out, classes);
  if (!s.ok()) {
    std::fprintf(stderr, "reader_idx_fixture: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
