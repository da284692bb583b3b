// Writes a small dataset with the public DatasetWriter (format/writer.h), then reads a
// sample back with Dataset (format/dataset.h): the shape of any program that turns its own
// data into shards. Usage: write_dataset [DIR] (default: example-dataset; replaced if there).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/dataset.h"
#include "format/fields.h"
#include "format/writer.h"

namespace {

using namespace shardify;

// A 32x32 u8 picture of sample k: a gradient whose slope depends on the label k % 4.
std::vector<uint8_t> Pixels(int k) {
  std::vector<uint8_t> p(32 * 32);
  for (int i = 0; i < 32 * 32; ++i) p[i] = static_cast<uint8_t>((i % 32) * (k % 4 + 1) + k);
  return p;
}

// A field with its role (docs/fields.md), so that shardtool and the Loader know it.
FieldSpec Field(const char* name, FieldKind kind, const char* role) {
  FieldSpec f;
  f.name = name;
  f.kind = kind;
  f.meta = {{kMetaRole, role}};
  return f;
}

Status WriteDataset(const std::string& dir) {
  FieldSpec image = Field(kImageField, FieldKind::kNdarray, kRoleImage);
  image.dtype = DType::kU8;
  image.shape = {1, 32, 32};  // -1 for a size that varies per sample
  std::vector<FieldSpec> fields = {image, Field(kLabelField, FieldKind::kInt, kRoleLabel)};
  WriterOptions options;
  options.classes = {"flat", "gentle", "steep", "steeper"};
  options.overwrite = true;
  ASSIGN_OR_RETURN(auto writer, DatasetWriter::Create(dir, std::move(fields), options));
  for (int k = 0; k < 1000; ++k) {
    // The split, then one value per field in schema order; each split one contiguous run.
    SampleInput s{k < 800 ? "train" : "val", {FieldValue::Array(Pixels(k), {1, 32, 32}), FieldValue::Int(k % 4)}};
    RETURN_IF_ERROR(writer->Append(std::move(s)));  // checks against the schema, encodes, appends
  }
  RETURN_IF_ERROR(writer->Finish());  // the manifest, last: until now no dataset is visible
  std::printf("wrote %llu samples, %zu shard(s), %llu bytes into %s\n",
              static_cast<unsigned long long>(writer->samples_written()), writer->manifest().shards.size(),
              static_cast<unsigned long long>(writer->bytes_written()), dir.c_str());
  return Status::Ok();
}

Status ReadBack(const std::string& dir) {
  ASSIGN_OR_RETURN(auto ds, Dataset::Open(dir));
  ASSIGN_OR_RETURN(SampleView s, ds->Sample(817));
  std::vector<uint8_t> image(32 * 32);
  Decoder decoder;
  RETURN_IF_ERROR(s.Decode(0, image.data(), image.size(), decoder));
  ASSIGN_OR_RETURN(int64_t label, s.int_value(1));
  if (image != Pixels(817) || label != 817 % 4) {
    return Corruption("sample 817 of " + dir + " differs from what was written");
  }
  std::printf("read back sample 817: label %lld (%s), pixels equal\n", static_cast<long long>(label),
              ds->manifest().classes[label].c_str());
  return Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "example-dataset";
  Status s = WriteDataset(dir);
  if (s.ok()) s = ReadBack(dir);
  if (!s.ok()) {
    std::fprintf(stderr, "write_dataset: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
