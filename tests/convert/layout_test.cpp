// Each source layout converts into the fields of docs/fields.md.
#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "convert/programs/cli.h"
#include "convert/sources/case.h"
#include "tests/convert/convert_fixtures.h"

using namespace shardify;
using namespace shardify::convert;
using namespace shardify::convert::testing;

namespace {

void WriteIdx(const std::string& path, uint8_t rank, const std::vector<uint32_t>& dims,
              const std::vector<uint8_t>& data) {
  std::vector<uint8_t> b = {0, 0, 0x08, rank};
  for (uint32_t d : dims) {
    for (int k = 3; k >= 0; --k) b.push_back(static_cast<uint8_t>(d >> (8 * k)));
  }
  b.insert(b.end(), data.begin(), data.end());
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, b.data(), static_cast<unsigned>(b.size())) == static_cast<int>(b.size()));
  gzclose(f);
}

std::vector<uint8_t> GunzipHead(const std::string& path, size_t n) {
  gzFile f = gzopen(path.c_str(), "rb");
  std::vector<uint8_t> out(n);
  int got = gzread(f, out.data(), static_cast<unsigned>(n));
  gzclose(f);
  out.resize(got > 0 ? static_cast<size_t>(got) : 0);
  return out;
}

}  // namespace

TEST_CASE("convert: folder layout takes labels from sorted class folders") {
  TempDir dir;
  const std::string src = dir / "src";
  auto a = WritePng(src + "/dog/b.png", 1, 4, 5, 1);
  auto b = WritePng(src + "/cat/x.png", 1, 4, 5, 2);
  auto c = WritePng(src + "/cat/a.png", 1, 4, 5, 3);
  auto r = RunConvert(src, dir / "out");
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  CHECK(r->layout == "folder");
  auto rb = Open(dir / "out");
  const Manifest& m = rb.ds->manifest();
  CHECK(m.classes == std::vector<std::string>{"cat", "dog"});
  REQUIRE(m.num_samples == 3);
  CHECK(m.fields[rb.Field("image")].shape == Shape{1, 4, 5});
  CHECK(rb.Str(0, "path") == "cat/a.png");
  CHECK(rb.Str(1, "path") == "cat/x.png");
  CHECK(rb.Str(2, "path") == "dog/b.png");
  CHECK(rb.Int(0, "label") == 0);
  CHECK(rb.Int(2, "label") == 1);
  CHECK(rb.Array(0, "image") == c);
  CHECK(rb.Array(1, "image") == b);
  CHECK(rb.Array(2, "image") == a);
  CHECK(m.provenance.converter == "shardify");
  CHECK(!m.provenance.converter_version.empty());
  CHECK(m.provenance.source == src);
}

TEST_CASE("convert: idx layout reads .gz pairs, train and t10k become splits") {
  TempDir dir;
  const std::string src = dir / "mnist";
  MakeDirs(src);
  std::vector<uint8_t> train = Pixels(5 * 4 * 3, 1), test = Pixels(2 * 4 * 3, 2);
  WriteIdx(src + "/train-images-idx3-ubyte.gz", 3, {5, 4, 3}, train);
  WriteIdx(src + "/train-labels-idx1-ubyte.gz", 1, {5}, {3, 1, 4, 1, 5});
  WriteIdx(src + "/t10k-images-idx3-ubyte.gz", 3, {2, 4, 3}, test);
  WriteIdx(src + "/t10k-labels-idx1-ubyte.gz", 1, {2}, {9, 2});
  ConvertOptions o;
  o.class_names = {"c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9"};
  auto r = RunConvert(src, dir / "out", o);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  CHECK(r->layout == "idx");
  auto rb = Open(dir / "out");
  const Manifest& m = rb.ds->manifest();
  REQUIRE(m.splits.size() == 2);
  CHECK(m.splits[0].name == "train");
  CHECK(m.splits[0].num_samples == 5);
  CHECK(m.splits[1].name == "test");
  CHECK(m.classes.size() == 10);
  CHECK(rb.Int(2, "label") == 4);
  CHECK(rb.Int(6, "label") == 2);
  CHECK(rb.ShapeOf(0, "image") == Shape{1, 4, 3});
  CHECK(rb.Array(4, "image") == std::vector<uint8_t>(train.begin() + 48, train.end()));
  CHECK(rb.Array(5, "image") == std::vector<uint8_t>(test.begin(), test.begin() + 12));
}

TEST_CASE("convert: csv layout with class-name labels, split column and scalar columns") {
  TempDir dir;
  auto p0 = WritePng(dir / "imgs/a.png", 1, 3, 3, 1);
  auto p1 = WritePng(dir / "imgs/b.png", 1, 3, 3, 2);
  auto p2 = WritePng(dir / "imgs/c.png", 1, 3, 3, 3);
  WriteText(dir / "list.csv",
            "image,label,split,age,weight,site\n"
            "imgs/a.png,lung,val,40,1.5,\"north, 2\"\n"
            "imgs/b.png,heart,train,51,2,south\n"
            "imgs/c.png,lung,train,63,0.25,east\n");
  auto r = RunConvert(dir / "list.csv", dir / "out");
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  auto rb = Open(dir / "out");
  const Manifest& m = rb.ds->manifest();
  CHECK(m.classes == std::vector<std::string>{"heart", "lung"});
  REQUIRE(m.splits.size() == 2);
  CHECK(m.splits[0].name == "train");
  CHECK(m.splits[0].num_samples == 2);
  CHECK(m.splits[1].name == "val");
  CHECK(rb.Str(0, "path") == "imgs/b.png");
  CHECK(rb.Int(0, "label") == 0);
  CHECK(rb.Array(2, "image") == p0);
  CHECK(m.fields[rb.Field("age")].kind == FieldKind::kInt);
  CHECK(m.fields[rb.Field("weight")].kind == FieldKind::kFloat);
  CHECK(m.fields[rb.Field("site")].kind == FieldKind::kString);
  CHECK(rb.Int(1, "age") == 63);
  CHECK(rb.Str(2, "site") == "north, 2");
  auto v = rb.ds->Sample(1);
  REQUIRE(v.ok());
  CHECK(*v->float_value(static_cast<size_t>(rb.Field("weight"))) == 0.25);
  (void)p1;
  (void)p2;
}

TEST_CASE("convert: pairs layout stores 16-bit images with 8-bit masks") {
  TempDir dir;
  std::vector<uint16_t> v(6 * 4);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint16_t>(i * 1000);
  WriteRawPng(dir / "src/images/s1.png", 6, 4, 2 /*gray*/ - 2, 16, v);
  std::vector<uint16_t> mv(6 * 4);
  for (size_t i = 0; i < mv.size(); ++i) mv[i] = static_cast<uint16_t>(i % 3);
  WriteRawPng(dir / "src/masks/s1.png", 6, 4, 0, 8, mv);
  auto r = RunConvert(dir / "src", dir / "out");
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  CHECK(r->layout == "pairs");
  auto rb = Open(dir / "out");
  const Manifest& m = rb.ds->manifest();
  CHECK(m.fields[rb.Field("image")].dtype == DType::kU16);
  CHECK(m.fields[rb.Field("mask")].dtype == DType::kU8);
  CHECK(rb.ShapeOf(0, "mask") == Shape{1, 4, 6});
  std::vector<uint8_t> mask = rb.Array(0, "mask");
  for (size_t i = 0; i < mv.size(); ++i) CHECK(mask[i] == mv[i]);
  std::vector<uint8_t> img = rb.Array(0, "image");
  uint16_t px5;
  std::memcpy(&px5, &img[10], 2);
  CHECK(px5 == 5000);
}

TEST_CASE("convert: rle layout decodes one mask channel per class and keeps spacing") {
  TempDir dir;
  const std::string src = dir / "gi";
  std::vector<uint16_t> v(6 * 4, 300);
  WriteRawPng(src + "/train/case7/case7_day2/scans/slice_0001_6_4_1.50_1.25.png", 6, 4, 0, 16, v);
  WriteRawPng(src + "/train/case7/case7_day2/scans/slice_0002_6_4_1.50_1.25.png", 6, 4, 0, 16, v);
  WriteText(src + "/train.csv",
            "id,class,segmentation\n"
            "case7_day2_slice_0001,large_bowel,1 3 10 2\n"
            "case7_day2_slice_0001,small_bowel,\n"
            "case7_day2_slice_0001,stomach,2 2\n"
            "case7_day2_slice_0002,large_bowel,\n"
            "case7_day2_slice_0002,small_bowel,24 1\n"
            "case7_day2_slice_0002,stomach,\n");
  auto r = RunConvert(src, dir / "out");
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  CHECK(r->layout == "rle");
  auto rb = Open(dir / "out");
  REQUIRE(rb.ds->num_samples() == 2);
  CHECK(rb.Str(0, "path") == "case7_day2_slice_0001");
  CHECK(rb.ShapeOf(0, "mask") == Shape{3, 4, 6});
  std::vector<uint8_t> m0 = rb.Array(0, "mask");
  std::vector<uint8_t> want(72, 0);
  for (int i : {0, 1, 2, 9, 10}) want[static_cast<size_t>(i)] = 1;  // large_bowel
  for (int i : {1, 2}) want[static_cast<size_t>(48 + i)] = 1;       // stomach
  CHECK(m0 == want);
  std::vector<uint8_t> m1 = rb.Array(1, "mask");
  CHECK(m1[24 + 23] == 1);
  CHECK(rb.Doubles(0, "image.spacing") == std::vector<double>{1.5, 1.25});
  CHECK(FieldMeta(rb.ds->manifest().fields[rb.Field("mask")], "labels") ==
        R"({"large_bowel":0,"small_bowel":1,"stomach":2})");
  CHECK(FieldMeta(rb.ds->manifest().fields[rb.Field("mask")], "multi_label") == "true");  // organs may overlap
}

TEST_CASE("convert: nnunet layout stacks channels, keeps geometry and header, imagesTs is test") {
  TempDir dir;
  const std::string src = dir / "Dataset001";
  WriteText(src + "/dataset.json", R"({"channel_names": {"0": "T2", "1": "ADC"},
    "labels": {"background": 0, "tumor": 1}, "numTraining": 2, "file_ending": ".nii.gz"})");
  for (const char* c : {"case_001", "case_002"}) {
    WriteVolume(src + "/imagesTr/" + c + "_0000.nii.gz", DType::kI16, 3, 4, 5, 1);
    WriteVolume(src + "/imagesTr/" + c + "_0001.nii.gz", DType::kI16, 3, 4, 5, 2);
    WriteLabels(src + "/labelsTr/" + std::string(c) + ".nii.gz", 3, 4, 5, 3);
  }
  WriteVolume(src + "/imagesTs/case_009_0000.nii.gz", DType::kI16, 3, 4, 5, 4);
  WriteVolume(src + "/imagesTs/case_009_0001.nii.gz", DType::kI16, 3, 4, 5, 5);
  auto r = RunConvert(src, dir / "out");
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  CHECK(r->layout == "nnunet");
  auto rb = Open(dir / "out");
  const Manifest& m = rb.ds->manifest();
  REQUIRE(m.num_samples == 3);
  REQUIRE(m.splits.size() == 2);
  CHECK(m.splits[1].name == "test");
  CHECK(m.fields[rb.Field("image")].shape == Shape{2, 3, 4, 5});
  CHECK(m.fields[rb.Field("mask")].shape == Shape{-1, 3, 4, 5});
  CHECK(FieldMeta(m.fields[rb.Field("image")], "channel_names") == R"({"0":"T2","1":"ADC"})");
  CHECK(FieldMeta(m.fields[rb.Field("mask")], "labels") == R"({"background":0,"tumor":1})");
  const std::string ch1 = src + "/imagesTr/case_001_0001.nii.gz";
  std::vector<uint8_t> img = rb.Array(0, "image");
  std::vector<uint8_t> itk1 = ItkVoxels(ch1);
  REQUIRE(img.size() == 2 * itk1.size());
  CHECK(std::vector<uint8_t>(img.begin() + static_cast<std::ptrdiff_t>(itk1.size()), img.end()) == itk1);
  CHECK(rb.Array(0, "mask") == ItkVoxels(src + "/labelsTr/case_001.nii.gz"));
  const Geometry g = ItkGeometry(src + "/imagesTr/case_001_0000.nii.gz");
  CHECK(rb.Doubles(0, "image.spacing") == g.spacing);
  CHECK(rb.Doubles(0, "image.origin") == g.origin);
  CHECK(rb.Doubles(0, "image.direction") == g.direction);
  CHECK(Near(g.origin, TestGeometry().origin, 1e-4));
  std::string hdr = rb.Str(0, "image.nifti_header");
  CHECK(std::vector<uint8_t>(hdr.begin(), hdr.end()) == GunzipHead(src + "/imagesTr/case_001_0000.nii.gz", 348));
  CHECK(rb.ShapeOf(2, "mask") == Shape{0, 3, 4, 5});
  CHECK(rb.Str(2, "path") == "imagesTs/case_009");
}

TEST_CASE("convert: nnunet mask values dataset.json does not declare fail before anything is written") {
  TempDir dir;
  const std::string src = dir / "Dataset002";
  // Regions and the ignore label declare their values too: 0, 1, 2, 3.
  WriteText(src + "/dataset.json", R"({"channel_names": {"0": "MR"}, "labels": {"background": 0, "whole": [1, 2],
    "core": 2, "ignore": 3}, "regions_class_order": [1, 2], "file_ending": ".nii.gz"})");
  const std::vector<std::pair<std::string, std::vector<uint16_t>>> masks = {
      {"a", {0, 1, 2, 3}}, {"b", {0, 7, 1605}}, {"c", {0, 2}}, {"d", {7, 0}}};
  for (const auto& [name, values] : masks) {
    WriteVolume(src + "/imagesTr/" + name + "_0000.nii.gz", DType::kI16, 2, 3, 4, 1);
    std::vector<uint8_t> px(24 * 2, 0);
    for (size_t i = 0; i < values.size(); ++i) std::memcpy(&px[i * 2], &values[i], 2);
    MakeDirs(src + "/labelsTr");
    REQUIRE(WriteNifti(src + "/labelsTr/" + name + ".nii.gz", DType::kU16, {1, 2, 3, 4}, px, TestGeometry()).ok());
  }
  ConvertOptions dry;
  dry.dry_run = true;
  for (const ConvertOptions& o : {ConvertOptions{}, dry}) {
    auto r = RunConvert(src, dir / "out", o);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(
        r.status().ToString(),
        Catch::Contains("masks hold values that dataset.json's labels (0, 1, 2, 3) do not declare: 7, 1605, "
                        "in 2 of 4 masks, first " +
                        src + "/labelsTr/b.nii.gz (7, 1605), " + src + "/labelsTr/d.nii.gz (7); training would " +
                        "ignore those voxels. Fix the masks or dataset.json, or pass --labels-from-masks"));
    CHECK_FALSE(std::filesystem::exists(dir / "out"));  // nothing written, not even the directory
  }
  ConvertOptions adopt;
  adopt.labels_from_masks = true;
  auto r = RunConvert(src, dir / "out", adopt);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  CHECK_THAT(FormatSummary(*r), Catch::Contains("warning: mask values 7, 1605 are not declared in dataset.json; added "
                                                "as labels label_<value> (--labels-from-masks)"));
  auto rb = Open(dir / "out");
  CHECK(FieldMeta(rb.ds->manifest().fields[rb.Field("mask")], "labels") ==
        R"({"background":0,"whole":[1,2],"core":2,"ignore":3,"label_7":7,"label_1605":1605})");
  CHECK(ParseCommandLine({"s", "-o", "d", "--labels-from-masks"})->options.labels_from_masks);

  // Values that are not integers cannot become labels.
  std::filesystem::remove(src + "/labelsTr/d.nii.gz");
  std::vector<uint8_t> half(24 * 4, 0);
  const float v = 0.5f;
  std::memcpy(half.data(), &v, 4);
  REQUIRE(WriteNifti(src + "/labelsTr/d.nii.gz", DType::kF32, {1, 2, 3, 4}, half, TestGeometry()).ok());
  r = RunConvert(src, dir / "out2", adopt);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().ToString(), Catch::Contains("do not declare: 0.5, 7, 1605"));
  CHECK_THAT(r.status().ToString(), Catch::Contains("(values that are not integers cannot become labels)"));
}

TEST_CASE("convert: nnunet labels must be 0, 1, 2, ... without gaps, regions and ignore as nnU-Net reads them") {
  TempDir dir;
  const std::string src = dir / "Dataset003";
  WriteVolume(src + "/imagesTr/a_0000.nii.gz", DType::kI16, 2, 3, 4, 1);
  WriteLabels(src + "/labelsTr/a.nii.gz", 2, 3, 4, 1);
  const std::vector<std::pair<std::string, std::string>> refused = {
      {R"({"background": 0, "a": 1, "b": 3})", "they are 0, 1, 3; missing 2."},
      {R"({"a": 1, "b": 2})", "they are 1, 2; missing 0 (background)."},
      {R"({"background": 0, "whole": [1, 4], "core": 4})", "they are 0, 1, 4; missing 2, 3."},
      {R"({"background": 0, "a": 1, "b": -1})", "they are -1, 0, 1; negative -1."},
      {R"({"background": 0, "a": 1, "ignore": 5})",
       "'ignore' is 5, where nnU-Net takes one integer just above the labels: 2."},
      {R"({"background": 0, "a": 1, "ignore": [2]})", "'ignore' is [2], where"},
  };
  for (const auto& [labels, why] : refused) {
    INFO(labels);
    WriteText(src + "/dataset.json",
              R"({"channel_names": {"0": "MR"}, "file_ending": ".nii.gz", "labels": )" + labels + "}");
    auto r = RunConvert(src, dir / "out");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(r.status().ToString(), Catch::Contains(src + "/dataset.json: labels must be 0 (background), 1, 2, ... "
                                                            "without gaps, as nnU-Net requires; "));
    CHECK_THAT(r.status().ToString(), Catch::Contains(why));
    CHECK_FALSE(std::filesystem::exists(dir / "out"));  // refused before anything is written
  }
  // Regions need regions_class_order, one entry per foreground label.
  const std::vector<std::pair<std::string, std::string>> regions = {
      {R"("labels": {"background": 0, "whole": [1, 2], "core": 2})",
       "labels 'whole' are regions (lists of values), and then nnU-Net needs 'regions_class_order', one value per "
       "foreground label (2); it is missing"},
      {R"("labels": {"background": 0, "whole": [1, 2], "core": 2}, "regions_class_order": [1])",
       "'regions_class_order' is [1]; nnU-Net takes a list of 2 integers"},
  };
  for (const auto& [json, why] : regions) {
    INFO(json);
    WriteText(src + "/dataset.json", R"({"channel_names": {"0": "MR"}, "file_ending": ".nii.gz", )" + json + "}");
    auto r = RunConvert(src, dir / "out");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(r.status().ToString(), Catch::Contains(why));
  }
  // Regions (lists) count with their values; "ignore" just above the labels is fine.
  for (const char* labels : {R"({"background": 0, "whole": [1, 2, 3], "core": [2, 3], "enhancing": 3},
                              "regions_class_order": [1, 2, 3])",
                             R"({"background": 0, "organ": 1, "ignore": 2})", R"({"background": 0, "organ": 1})"}) {
    INFO(labels);
    WriteText(src + "/dataset.json",
              std::string(R"({"channel_names": {"0": "MR"}, "file_ending": ".nii.gz", "labels": )") + labels + "}");
    auto r = RunConvert(src, dir / "ok", [] {
      ConvertOptions o;
      o.dry_run = true;
      return o;
    }());
    INFO(r.status().ToString());
    CHECK(r.ok());
  }
}

TEST_CASE("convert: nifti layout stores differing sizes as variable dims (-1)") {
  TempDir dir;
  WriteVolume(dir / "vols/a.nii.gz", DType::kF32, 3, 4, 5, 1);
  WriteVolume(dir / "vols/sub/b.nii", DType::kF32, 2, 4, 6, 2);
  WriteVolume(dir / "vols/c.nii.gz", DType::kF32, 2, 4, 6, 3, TestGeometry(), 2);
  auto r = RunConvert(dir / "vols", dir / "out");
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  CHECK(r->layout == "nifti");
  auto rb = Open(dir / "out");
  CHECK(rb.ds->manifest().fields[rb.Field("image")].shape == Shape{-1, -1, 4, -1});
  CHECK(rb.ShapeOf(0, "image") == Shape{1, 3, 4, 5});
  CHECK(rb.ShapeOf(1, "image") == Shape{2, 2, 4, 6});
  CHECK(rb.ShapeOf(2, "image") == Shape{1, 2, 4, 6});
  CHECK(rb.Str(2, "path") == "sub/b.nii");
  CHECK(rb.Array(2, "image") == ItkVoxels(dir / "vols/sub/b.nii"));
  CHECK(rb.Int(0, "label") == -1);
}

TEST_CASE("convert: --split is stratified by class, seeded and deterministic") {
  TempDir dir;
  for (int c = 0; c < 3; ++c) {
    for (int i = 0; i < 10; ++i)
      WritePng(dir / ("src/c" + std::to_string(c) + "/" + std::to_string(i) + ".png"), 1, 2, 2,
               static_cast<uint32_t>(i));
  }
  ConvertOptions o;
  o.split = {{"train", 0.6}, {"val", 0.2}, {"test", 0.2}};
  o.seed = 7;
  auto r = RunConvert(dir / "src", dir / "a", o);
  REQUIRE(r.ok());
  auto rb = Open(dir / "a");
  const Manifest& m = rb.ds->manifest();
  REQUIRE(m.splits.size() == 3);
  CHECK(m.splits[0].num_samples == 18);
  CHECK(m.splits[1].num_samples == 6);
  CHECK(m.splits[2].num_samples == 6);
  std::map<int64_t, int> val_per_class;
  std::vector<std::string> val_paths;
  for (uint64_t i = m.splits[1].first_sample; i < m.splits[1].first_sample + 6; ++i) {
    ++val_per_class[rb.Int(i, "label")];
    val_paths.push_back(rb.Str(i, "path"));
  }
  CHECK(val_per_class == std::map<int64_t, int>{{0, 2}, {1, 2}, {2, 2}});
  REQUIRE(RunConvert(dir / "src", dir / "b", o).ok());
  CHECK(ReadBytes(dir / "a/shard-00000.sfs") == ReadBytes(dir / "b/shard-00000.sfs"));
  o.seed = 8;
  REQUIRE(RunConvert(dir / "src", dir / "c", o).ok());
  auto rc = Open(dir / "c");
  std::vector<std::string> other;
  for (uint64_t i = 18; i < 24; ++i) other.push_back(rc.Str(i, "path"));
  CHECK(other != val_paths);
}

TEST_CASE("convert: auto-detection asks the layouts from the most specific to the most generic") {
  TempDir dir;
  const std::string src = dir / "src";
  MakeDirs(src + "/cls");  // a class folder: folder, when nothing more specific is there
  CHECK(*DetectLayout(src) == Layout::kFolder);
  WriteText(src + "/v.nii", "");  // a volume beside it
  CHECK(*DetectLayout(src) == Layout::kNifti);
  WriteText(src + "/train-images-idx3-ubyte", "");
  CHECK(*DetectLayout(src) == Layout::kIdx);
  MakeDirs(src + "/images");
  MakeDirs(src + "/masks");
  CHECK(*DetectLayout(src) == Layout::kPairs);
  MakeDirs(src + "/train");
  WriteText(src + "/train.csv", "");
  CHECK(*DetectLayout(src) == Layout::kRle);
  MakeDirs(src + "/imagesTr");
  WriteText(src + "/dataset.json", "{}");
  CHECK(*DetectLayout(src) == Layout::kNnunet);
  // The destination inside the source is never taken for a class folder.
  MakeDirs(dir / "only");
  MakeDirs(dir / "only/out");
  auto none = DetectLayout(dir / "only", dir / "only/out");
  REQUIRE_FALSE(none.ok());
  CHECK_THAT(none.status().message(), Catch::Contains("cannot tell the layout (no class folders,"));
  CHECK_THAT(none.status().message(), Catch::Contains("dataset.json"));
  WriteText(dir / "list.csv", "image\n");
  CHECK(*DetectLayout(dir / "list.csv") == Layout::kCsv);
  WriteText(dir / "list.txt", "image\n");
  CHECK_THAT(DetectLayout(dir / "list.txt").status().message(), Catch::Contains("a source file must be a .csv"));
}

TEST_CASE("convert: layout names, --help lines and --classes come from one table") {
  const std::string help = LayoutHelp();
  for (Layout l :
       {Layout::kFolder, Layout::kCsv, Layout::kPairs, Layout::kRle, Layout::kNnunet, Layout::kNifti, Layout::kIdx}) {
    const std::string name = LayoutName(l);
    INFO(name);
    CHECK(ParseLayout(name) == l);
    CHECK(("\n" + help).find("\n  " + name + " ") != std::string::npos);  // its line
    CHECK(LayoutNames().find(name) != std::string::npos);
  }
  CHECK(ParseLayout("auto") == Layout::kAuto);
  CHECK_FALSE(ParseLayout("folders").has_value());
  CHECK(LayoutNames() == "auto, folder, csv, pairs, rle, nnunet, nifti or idx");
  TempDir dir;
  const std::string src = ManyPngs(dir, 4);
  auto named = PlanSource(src, Layout::kFolder, {"a", "b"});
  REQUIRE_FALSE(named.ok());
  CHECK(named.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(named.status().message(), Catch::Contains("--classes applies to the csv and idx layouts"));
}

namespace {

// Pixels of a layout's own: a u16 [1, 2, 3] image, or a mask over the case's image file
// that sets the image's spacing (or fails, naming the case).
class TestSource final : public CaseSource {
 public:
  enum Supplies { kImage, kMask, kBadMask };
  explicit TestSource(Supplies s) : s_(s) {}
  bool supplies_image() const override { return s_ == kImage; }
  bool supplies_mask() const override { return s_ != kImage; }
  Result<ImageInfo> InspectImage() const override {
    ImageInfo i;
    i.dtype = DType::kU16;
    i.shape = {1, 2, 3};
    return i;
  }
  Result<DecodedImage> DecodeImage() const override {
    DecodedImage d;
    ASSIGN_OR_RETURN(d.info, InspectImage());
    d.pixels = Pixels(12, 7);
    return d;
  }
  Result<ImageInfo> InspectMask(ImageInfo* image) const override {
    image->geometry.spacing = {0.5, 0.25};
    ImageInfo m;
    m.shape = {1, image->shape[1], image->shape[2]};
    return m;
  }
  Result<DecodedImage> DecodeMask(ImageInfo* image, const std::string& where) const override {
    if (s_ == kBadMask) return Corruption(where + ": this mask cannot be read");
    DecodedImage d;
    ASSIGN_OR_RETURN(d.info, InspectMask(image));
    d.pixels.assign(static_cast<size_t>(image->shape[1] * image->shape[2]), 1);
    return d;
  }

 private:
  Supplies s_;
};

}  // namespace

TEST_CASE("convert: a case's source supplies its image or its mask, and its files the rest") {
  CaseInput item;
  item.name = "item#3";
  item.source = std::make_shared<TestSource>(TestSource::kImage);
  CHECK_FALSE(HasMask(item));
  auto info = InspectCase(item);
  REQUIRE(info.ok());
  CHECK(info->image.shape == Shape{1, 2, 3});
  CHECK(info->image.dtype == DType::kU16);
  CHECK_FALSE(info->has_mask);
  auto data = DecodeCase(item);
  REQUIRE(data.ok());
  CHECK(data->image.pixels == Pixels(12, 7));

  TempDir dir;
  CaseInput slice;
  slice.name = "slice";
  slice.images = {dir / "a.png"};
  const std::vector<uint8_t> pixels = WritePng(slice.images[0], 1, 4, 5, 3);
  slice.source = std::make_shared<TestSource>(TestSource::kMask);
  CHECK(HasMask(slice));
  info = InspectCase(slice);
  REQUIRE(info.ok());
  REQUIRE(info->has_mask);
  CHECK(info->mask.shape == Shape{1, 4, 5});
  CHECK(info->image.geometry.spacing == std::vector<double>{0.5, 0.25});
  data = DecodeCase(slice);
  REQUIRE(data.ok());
  CHECK(data->image.pixels == pixels);
  CHECK(data->image.info.geometry.spacing == std::vector<double>{0.5, 0.25});
  REQUIRE(data->has_mask);
  CHECK(data->mask.pixels == std::vector<uint8_t>(20, 1));

  slice.source = std::make_shared<TestSource>(TestSource::kBadMask);
  data = DecodeCase(slice);
  REQUIRE_FALSE(data.ok());
  CHECK(data.status().code() == StatusCode::kCorruption);
  CHECK_THAT(data.status().message(), Catch::Contains("slice: this mask cannot be read"));
}

TEST_CASE("convert: an idx case decodes after its plan is gone, and rle cases have masks") {
  TempDir dir;
  const std::string src = dir / "mnist";
  MakeDirs(src);
  const std::vector<uint8_t> train = Pixels(3 * 2 * 2, 4);
  WriteIdx(src + "/train-images-idx3-ubyte.gz", 3, {3, 2, 2}, train);
  WriteIdx(src + "/train-labels-idx1-ubyte.gz", 1, {3}, {0, 1, 0});
  CaseInput kept;
  {
    auto plan = PlanSource(src, Layout::kIdx, {});
    REQUIRE(plan.ok());
    REQUIRE(plan->cases.size() == 3);
    CHECK(plan->shared_files.size() == 2);
    CHECK_FALSE(HasMask(plan->cases[0]));
    kept = plan->cases[2];  // shares the images array with the plan, which goes
  }
  auto data = DecodeCase(kept);
  REQUIRE(data.ok());
  CHECK(data->image.info.shape == Shape{1, 2, 2});
  CHECK(data->image.pixels == std::vector<uint8_t>(train.begin() + 8, train.end()));

  const std::string gi = dir / "gi";
  WriteRawPng(gi + "/train/case1/case1_day1/scans/slice_0001_3_2_1.50_1.50.png", 3, 2, 0, 8, {1, 2, 3, 4, 5, 6});
  WriteText(gi + "/train.csv", "id,class,segmentation\ncase1_day1_slice_0001,stomach,2 2\n");
  auto plan = PlanSource(gi, Layout::kRle, {});
  REQUIRE(plan.ok());
  REQUIRE(plan->cases.size() == 1);
  CHECK(HasMask(plan->cases[0]));
}
