// shardtool bench: how fast a dataset can be read.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "base/status.h"
#include "format/dataset.h"
#include "format/types.h"

namespace shardify::tools {

struct BenchOptions {
  IoMode io = IoMode::kMmap;  // how shards are read (--io mmap|pread)
  std::string split;          // empty = the first split
  size_t batch = 64;          // samples per batch (>= 1); patch mode: slots of which the last third are forced
  size_t threads = 0;         // decode threads; 0 = all cores
  uint64_t epochs = 1;        // passes over the split (>= 1); patch mode: whole-volume passes
  uint64_t seed = 0;          // shuffle seed; patch mode: also the patch positions
  bool direct = false;        // Dataset + SampleView::Decode on the threads, without the Loader
  bool json = false;          // {mode, samples, bytes, seconds, samples_per_s, bytes_per_s, ...}
  // Patch mode when not empty: "DxHxW", three positive integers (see Bench below).
  std::string patch;
  uint64_t patches = 0;  // patch mode: patches drawn; 0 = 8 per sample of the split, at least 32
};

// Patch mode figures: random patches against whole volumes, on the same threads.
struct PatchBench {
  Shape patch;               // spatial patch, applied to the trailing axes of the image
  std::string label_field;   // "mask" when the dataset has that ndarray (decoded with each patch), else ""
  uint64_t patches = 0;      // patches drawn
  uint64_t patch_bytes = 0;  // their decoded bytes, image and label
  double patch_seconds = 0;  // wall clock of the patch phase
  uint64_t chunks = 0;       // chunks decompressed in the patch phase (image and label; 0 if unchunked)
  uint64_t volumes = 0;      // whole image fields decoded, all epochs
  uint64_t volume_bytes = 0;
  double volume_seconds = 0;  // wall clock of the whole-volume phase
  double patches_per_s() const { return patch_seconds > 0 ? patches / patch_seconds : 0; }
  double full_volumes_per_s() const { return volume_seconds > 0 ? volumes / volume_seconds : 0; }
  double speedup() const { return full_volumes_per_s() > 0 ? patches_per_s() / full_volumes_per_s() : 0; }
  double chunks_per_patch() const { return patches ? static_cast<double>(chunks) / patches : 0; }
};

struct BenchResult {
  std::string mode;      // "loader", "direct" or "patch"
  uint64_t samples = 0;  // samples read, all epochs (patch mode: the whole volumes)
  uint64_t bytes = 0;    // decoded bytes of every ndarray field read (patch mode: both phases)
  double seconds = 0;    // wall clock, including opening
  PatchBench patch;      // patch mode only
  double samples_per_s() const { return seconds > 0 ? samples / seconds : 0; }
  double bytes_per_s() const { return seconds > 0 ? bytes / seconds : 0; }
};

// Reads every sample of the split `epochs` times in a seeded shuffled order and times
// it: through the streaming Loader (batches of `batch`, pinned ring, prefetch), or
// directly (`direct`, or when this build has no reader). Checksums are verified, as in
// training.
//
// With `patch` (patch mode, `direct` ignored), two phases on `threads` threads, each
// thread with its own Decoder and reused buffers: first `patches` random patches drawn
// by PatchSampler over the samples of the split (patch k from the k-th sample of a seeded
// shuffle, cycling; image field "image", label "mask" and "mask.fg_locations" when
// present, foreground fraction 0.33 over slots of `batch`), then the whole "image" field
// of every sample of the split, `epochs` times (SampleView::Decode). The patch phase also
// decodes the label patch, the whole-volume phase only the image, so `speedup` leans low.
// Errors: InvalidArgument for a malformed `patch` (naming --patch) or one of higher rank
// than the image; NotFound when there is no ndarray field "image"; Unsupported when
// shardtool was built without the reader library.
Result<BenchResult> Bench(const std::string& dir, const BenchOptions& options);

// Bench, then a line with samples/s and MB/s (or the JSON object) on `out`; in patch mode
// a line per phase and the ratio, or one JSON object (mode "patch").
Status RunBench(const std::string& dir, const BenchOptions& options, std::ostream& out);

}  // namespace shardify::tools
