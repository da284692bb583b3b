// Datasets built with DatasetWriter for the shardtool tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format/manifest.h"
#include "format/types.h"
#include "tests/common/temp_dir.h"

namespace shardify::tools::test {

using shardify::testing::TempDir;  // removed with everything in it on destruction

// A field of the schema.
FieldSpec Spec(std::string name, FieldKind kind, DType dtype = DType::kU8, Shape shape = {},
               std::vector<KeyValue> meta = {});

// Pixel k of 2D sample i, channel-first (a formula, so tests recompute what was written).
uint8_t Pixel8(uint64_t i, size_t k);
uint16_t Pixel16(uint64_t i, size_t k);
int64_t LabelOf(uint64_t i);  // -1 for every 7th sample (unlabeled)

// 2D gray u8 images [1, 8, 12], labels over classes {cat, dog, bird}, a path string;
// splits train (kTrain samples) then test (kTest); small shards (several per dataset).
inline constexpr uint64_t kTrain = 10, kTest = 4;
inline constexpr int64_t kH8 = 8, kW8 = 12;
extern const std::vector<std::string> kClasses;
void WriteGray8(const std::string& dir);

// RGB u16 images [3, 6, 5] with a u8 mask [1, 6, 5] and labels; one split "train" of 5.
inline constexpr uint64_t kRgbSamples = 5;
inline constexpr int64_t kH16 = 6, kW16 = 5;
void WriteRgb16WithMask(const std::string& dir);

// The voxels and header of a real NIfTI file.
struct NiftiSource {
  std::vector<uint8_t> file;  // the whole decompressed file
  std::vector<uint8_t> header;
  DType dtype = DType::kI16;
  Shape shape;  // [1, D, H, W]
  size_t vox_offset = 0;
  std::vector<double> spacing, origin, direction;
};
extern const char kNiftiPath[];  // KmeansTest_T1UCharRaw.nii.gz of the ITK examples
NiftiSource ReadNiftiSource(const std::string& path);
// One volume sample from `src` (image, image.spacing/origin/direction, image.nifti_header,
// label 0, class "brain"); the image is stored in chunks of `chunk` when it is not empty.
void WriteVolume(const std::string& dir, const NiftiSource& src, const Shape& chunk = {});

// The first `n` test images and labels of Debian's Fashion-MNIST (idx files), as written
// to `dir` by WriteFashionMnist: image u8 [1, 28, 28], label, ten class names; with
// `dictionary`, the images get a zstd dictionary trained on them, as `shardify` gives
// small images.
struct Mnist {
  std::vector<std::vector<uint8_t>> images;
  std::vector<int64_t> labels;
};
extern const char kFashionMnistDir[];
Mnist ReadFashionMnist(size_t n);
void WriteFashionMnist(const std::string& dir, const Mnist& data, bool dictionary = false);

std::vector<uint8_t> ReadFile(const std::string& path);
// The big-endian 32-bit number at p (PNG's lengths, widths and heights).
inline uint32_t BigEndian32(const uint8_t* p) { return uint32_t(p[0]) << 24 | p[1] << 16 | p[2] << 8 | p[3]; }
void WriteFile(const std::string& path, const std::vector<uint8_t>& bytes);

}  // namespace shardify::tools::test
