// Fixtures for the converter tests: temporary directories, image files written at run
// time (ITK through convert/decode/image_io.h; libpng directly for palette and low bit depths),
// and helpers that read a converted dataset back.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "convert/convert.h"
#include "convert/decode/image_io.h"
#include "format/dataset.h"
#include "tests/common/process.h"
#include "tests/common/temp_dir.h"

namespace shardify::convert::testing {

using shardify::testing::TempDir;  // removed with everything in it

// Directory of the real example images from insighttoolkit5-examples.
std::string ItkDataDir();

void MakeDirs(const std::string& dir);
void WriteText(const std::string& path, const std::string& text);
std::vector<uint8_t> ReadBytes(const std::string& path);
void WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes);

// Deterministic pixels: n bytes from `seed`, smooth enough to compress.
std::vector<uint8_t> Pixels(size_t n, uint32_t seed);

// An 8-bit PNG of shape [c, h, w] (via ITK), pixels from Pixels(seed). Returns the pixels.
std::vector<uint8_t> WritePng(const std::string& path, int c, int h, int w, uint32_t seed);
// A PNG with libpng: `color_type` and `bit_depth` as in png.h; palette images get a
// `palette_size`-entry gray-ish palette (and a tRNS chunk when `trns`); gray images with
// `trns` get a tRNS chunk making the gray value 1 transparent. `rows` are the
// packed sample values per pixel (one value per channel, before bit packing).
void WriteRawPng(const std::string& path, int w, int h, int color_type, int bit_depth,
                 const std::vector<uint16_t>& values, bool trns = false);

// Flips a byte in the middle of a PNG's first IDAT chunk: the header stays intact (the
// file passes inspection), decoding fails.
void DamageImageData(const std::string& png_path);

// A 3D NIfTI-1 volume [1, d, h, w] of `dtype` with a non-trivial geometry.
Geometry TestGeometry(double shift = 0);
void WriteVolume(const std::string& path, DType dtype, int d, int h, int w, uint32_t seed,
                 const Geometry& g = TestGeometry(), int channels = 1);
// A u8 label map [1, d, h, w] with the values 0 .. labels - 1, from Pixels(seed).
void WriteLabels(const std::string& path, int d, int h, int w, uint32_t seed, int labels = 2,
                 const Geometry& g = TestGeometry());

// A class-folder source `dir`/src of `n` PNGs in 3 classes, sizes varying with the index.
std::string ManyPngs(const TempDir& dir, int n, int size = 8);
// Whether `dir` holds a shard or manifest file.
bool HasDatasetFiles(const std::string& dir);
using shardify::testing::Shell;  // tests/common/process.h
using shardify::testing::Spawn;
using shardify::testing::WaitExitCode;
// Waits until `dir` holds a shard file (or the child exits); true if one appeared.
bool WaitForShard(const std::string& dir, pid_t pid);
// The files of `dir` (not recursive): name -> bytes.
std::map<std::string, std::vector<uint8_t>> DirBytes(const std::string& dir);

// Sets `flag` once `at` samples are converted; counts its calls.
class CancelAt final : public ProgressSink {
 public:
  CancelAt(std::atomic<bool>* flag, uint64_t at) : flag_(flag), at_(at) {}
  void OnProgress(const Progress& p) override;
  int calls = 0;

 private:
  std::atomic<bool>* flag_;
  uint64_t at_;
};

// Converts with test-friendly defaults (no fsync, 2 threads) and returns the result.
Result<ConvertSummary> RunConvert(const std::string& src, const std::string& dst, ConvertOptions o = ConvertOptions());

// Reads a converted dataset back.
struct Readback {
  std::unique_ptr<Dataset> ds;
  int Field(const std::string& name) const;  // asserts it exists
  std::vector<uint8_t> Array(uint64_t sample, const std::string& field) const;
  Shape ShapeOf(uint64_t sample, const std::string& field) const;
  int64_t Int(uint64_t sample, const std::string& field) const;
  std::string Str(uint64_t sample, const std::string& field) const;
  std::vector<double> Doubles(uint64_t sample, const std::string& field) const;
};
Readback Open(const std::string& dir);

// Geometry as ITK's NIfTI ImageIO reads it (3 spatial axes).
Geometry ItkGeometry(const std::string& path);
// Voxels as ITK's NIfTI ImageIO reads them (for files without scaling).
std::vector<uint8_t> ItkVoxels(const std::string& path);

// The same NIfTI-1 file in big-endian byte order (header fields and voxels swapped).
std::vector<uint8_t> ToBigEndianNifti1(const std::vector<uint8_t>& le, size_t elem_size);
// The same data as a NIfTI-2 file (header rebuilt, voxels after a 544-byte offset).
std::vector<uint8_t> ToNifti2(const std::vector<uint8_t>& n1);

// The value of provenance option `key` of `m`, or "" when it has none.
std::string ProvenanceOption(const Manifest& m, const std::string& key);
// The value of meta `key` of field `f`, or "" when it has none.
std::string FieldMeta(const FieldSpec& f, const std::string& key);
// The summary's preprocessing notes, one per line.
std::string PreprocessingNotes(const ConvertSummary& s);

// True when every value of a and b differs by at most tol (relative to max(1, |a|)).
bool Near(const std::vector<double>& a, const std::vector<double>& b, double tol = 1e-5);

}  // namespace shardify::convert::testing
