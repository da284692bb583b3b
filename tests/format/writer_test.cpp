#include "format/writer.h"

#include <catch2/catch.hpp>
#include <fstream>

#include "base/file.h"
#include "fixtures.h"
#include "format/dataset.h"
#include "tests/common/temp_dir.h"

using namespace shardify;
using namespace shardify::testing;

TEST_CASE("format: a writer destroyed before Finish leaves nothing behind") {
  TempDir tmp;
  const std::string dir = tmp / "ds";
  {
    WriterOptions o;
    o.target_shard_bytes = 512;
    o.fsync = false;
    auto w = DatasetWriter::Create(dir, ImageLabelFields(), o);
    REQUIRE(w.ok());
    for (int i = 0; i < 50; ++i) REQUIRE((*w)->Append(ImageLabelSample(i)).ok());
    REQUIRE((*w)->bytes_written() > 512);  // some shards were completed and renamed
  }
  CHECK(ListDir(dir)->empty());
  CHECK(Dataset::Open(dir).status().code() == StatusCode::kNotFound);
}

TEST_CASE("format: an existing dataset is refused unless overwrite") {
  TempDir tmp;
  const std::string dir = tmp / "ds";
  REQUIRE(WriteSmallDataset(dir, 10).ok());
  Status again = WriteSmallDataset(dir, 5);
  CHECK(again.code() == StatusCode::kAlreadyExists);
  CHECK(again.message() == dir +
                               ": already holds a dataset (manifest.sfm); to replace it, pass --overwrite on the "
                               "command line, overwrite=True in Python");
  CHECK(Dataset::Open(dir).value()->num_samples() == 10);
  WriterOptions o;
  o.overwrite = true;
  REQUIRE(WriteSmallDataset(dir, 5, 4096, o).ok());
  CHECK(Dataset::Open(dir).value()->num_samples() == 5);
}

TEST_CASE("format: a non-empty directory that is not a dataset is refused") {
  TempDir tmp;
  std::ofstream(tmp / "notes.txt") << "keep me";
  Status s = WriteSmallDataset(tmp.path(), 3);
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("notes.txt"));
  CHECK(PathExists(tmp / "notes.txt"));
}

TEST_CASE("format: leftovers of an interrupted write are cleared") {
  TempDir tmp;
  std::ofstream(tmp / "shard-00000.sfs.tmp") << "half written";
  std::ofstream(tmp / "shard-00003.sfs") << "stale";
  REQUIRE(WriteSmallDataset(tmp.path(), 3).ok());
  CHECK_FALSE(PathExists(tmp / "shard-00000.sfs.tmp"));
  CHECK_FALSE(PathExists(tmp / "shard-00003.sfs"));
  CHECK(Dataset::Open(tmp.path()).value()->num_samples() == 3);
}

TEST_CASE("format: samples that do not fit the schema name the field") {
  TempDir tmp;
  WriterOptions o;
  o.fsync = false;
  auto w = DatasetWriter::Create(tmp.path(), ImageLabelFields(), o);
  REQUIRE(w.ok());
  SampleInput s = ImageLabelSample(0);
  s.values[0].shape = {1, 8, 9};
  Status st = (*w)->Append(std::move(s));
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(st.message(), Catch::Contains("field 'image'") && Catch::Contains("[1, 8, 9]"));

  auto w2 = DatasetWriter::Create(tmp / "b", ImageLabelFields(), o);
  s = ImageLabelSample(0);
  s.values[0].bytes.pop_back();
  CHECK_THAT((*w2)->Append(std::move(s)).message(), Catch::Contains("needs 64 bytes, got 63"));
  s = ImageLabelSample(0);
  s.values[1] = FieldValue::Float(1.0);
  CHECK_THAT((*w2)->Append(std::move(s)).message(), Catch::Contains("value is float, the field is int"));
}

TEST_CASE("format: a split must be one contiguous run") {
  TempDir tmp;
  WriterOptions o;
  o.fsync = false;
  auto w = DatasetWriter::Create(tmp.path(), ImageLabelFields(), o);
  REQUIRE((*w)->Append(ImageLabelSample(0, "train")).ok());
  REQUIRE((*w)->Append(ImageLabelSample(1, "val")).ok());
  Status s = (*w)->Append(ImageLabelSample(2, "train"));
  CHECK_THAT(s.message(), Catch::Contains("split 'train' must be appended as one contiguous run"));
  CHECK_FALSE((*w)->Finish().ok());  // the writer stays failed
}

TEST_CASE("format: bad writer options and schemas are refused") {
  TempDir tmp;
  WriterOptions o;
  o.level = 0;
  CHECK(DatasetWriter::Create(tmp.path(), ImageLabelFields(), o).status().code() == StatusCode::kInvalidArgument);
  auto fields = ImageLabelFields();
  fields[1].name = "image";
  CHECK_THAT(DatasetWriter::Create(tmp.path(), fields, {}).status().message(), Catch::Contains("appears twice"));
}
