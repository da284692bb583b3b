// The conversion pipeline: a source layout in, a shard dataset out.
//
//   ConvertOptions o; o.source = "data/mednist"; o.dest = "out/mednist";
//   ASSIGN_OR_RETURN(ConvertSummary s, Convert(o, &progress));
//
// Steps: enumerate the source (sorted), read every header to fix the schema (a dimension
// that differs between samples becomes -1, a varying dtype is an error), assign splits,
// order samples by split, optionally train zstd dictionaries, then decode and compress
// on `threads` threads and append in input order through a bounded reorder window, so the
// output is byte-identical for any thread count and memory stays bounded.
// Failures of single inputs fail the run, or with skip_errors are listed in
// `<dest>/skipped.tsv` (written atomically). The writer writes the manifest last and
// removes its files when the run fails or is cancelled, so nothing incomplete looks valid.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "base/strings.h"  // ParseByteSize
#include "convert/decode/image_io.h"
#include "convert/preprocess/preprocess.h"
#include "convert/sources/source.h"
#include "format/parts.h"
#include "format/types.h"

namespace shardify::convert {

// How images and masks are stored (`--codec`).
enum class CodecChoice {
  kZstd,  // zstd frames (a blob that does not shrink by 5% is stored raw), byte-shuffled
          // when 16-bit or wider
  kRaw,   // every array raw: larger, read by a copy with no decompression
  kAuto,  // raw when every image and mask together decode to at most kAutoRawBytes
          // (such a dataset stays in the page cache, where decompression is the whole
          // cost of reading), zstd otherwise
};
inline constexpr uint64_t kAutoRawBytes = 2ull << 30;
const char* CodecChoiceName(CodecChoice c);  // "zstd", "raw", "auto"

struct ConvertOptions {
  std::string source;  // directory, or a .csv for the csv layout
  std::string dest;    // dataset directory to create, or an s3:// location (see upload_internal.h)
  Layout layout = Layout::kAuto;
  int threads = 0;  // 0: all cores
  CodecChoice codec = CodecChoice::kZstd;
  int level = 0;                        // compression level (zstd 1..19); 0: auto (9 for samples up to 64 KiB, else 3)
  uint64_t shard_bytes = 256ull << 20;  // target shard size
  int dict = -1;                        // train a zstd dictionary per image/mask field:
                                        // 1 yes, 0 no, -1 auto (yes for samples up to 64 KiB,
                                        // when there are at least 1,000 of them)
  std::vector<std::pair<std::string, double>> split;  // e.g. {{"train",.8},{"val",.2}}; empty: none
  uint64_t seed = 0;                                  // seeds the split assignment
  std::string group_by;                               // with `split`: keep each group in one split; "case" /
                                                      // "day" (a layout's natural groups) or a regex over the
                                                      // case name (the `path` field); see detail::GroupKeys
  bool skip_errors = false;                           // --on-error skip
  bool overwrite = false;                             // replace an existing dataset at dest
  bool dry_run = false;                               // plan and inspect, write nothing
  bool fsync = true;
  std::vector<std::string> class_names;  // names for integer labels (idx, csv)
  size_t window = 0;                     // samples in flight; 0: 16 per thread, fewer for
                                         // large samples (about 1 GiB decoded at most)
  // Memory limits, checked from the headers before anything is decoded (also in a dry
  // run). A sample (image channels + mask) that decodes to more than max_sample_bytes is a
  // per-input error (ResourceExhausted; skippable). Converting a sample takes about
  // kMemoryPerSampleByte times its decoded bytes; the samples in flight are limited so
  // that together they stay under max_memory, and a sample that alone would exceed it
  // fails the run before anything is written. An allocation that fails all the same is an
  // error naming the input, never an abort.
  uint64_t max_sample_bytes = kDefaultMaxImageBytes;  // 2 GiB
  uint64_t max_memory = 0;                            // 0: half the physical memory, at least 1 GiB
  const std::atomic<bool>* cancel = nullptr;          // polled; when set, Convert returns Cancelled
  Shape patch_size;                                   // spatial training patch ({D, H, W} or {H, W}); when
                                                      // set, image and mask are stored chunked (format
                                                      // version 2) and masks get "mask.fg_locations"
  uint64_t fg_locations = 10000;                      // with patch_size: locations kept per class and case
                                                      // (0: no mask.fg_locations field)
  bool shuffle = true;                                // byte-shuffle image and mask fields of 2-, 4- or
                                                      // 8-byte elements (format version 3; smaller);
                                                      // zstd only
  // Conversion in parts (convert/pipeline/parts.h): with parts > 0, write only part `part` (1..parts),
  // a contiguous slice of the sample order, into dest/parts/; Merge() then makes dest the
  // dataset. A part that is complete already is not converted again (unless overwrite).
  uint32_t part = 0;
  uint32_t parts = 0;
  PreprocessOptions preprocess;  // dtype, crop, normalization, spacing (preprocess.h)
  // nnunet layout: mask values that dataset.json's labels do not declare fail the run
  // before anything is written; with this, integer ones become labels "label_<v>".
  bool labels_from_masks = false;
};

// Bytes held while one sample is decoded and compressed, per decoded byte (the pixels,
// an interleaved or filtered copy, the compressed output).
inline constexpr uint64_t kMemoryPerSampleByte = 3;
// ConvertOptions::max_memory when it is 0: half the physical memory, at least 1 GiB.
uint64_t DefaultMaxMemory();

struct SplitCount {
  std::string name;
  uint64_t samples = 0;
};

struct SkippedInput {
  std::string input;  // file or case
  std::string reason;
};

struct ConvertSummary {
  std::string layout;
  std::vector<SplitCount> splits;
  std::vector<std::string> classes;
  std::vector<std::string> fields;  // "image u8 [1, 28, 28]", ...
  std::vector<std::string> warnings;
  std::vector<std::string> preprocessing;  // what was promoted, cropped, normalized, resampled, and why
  std::vector<SkippedInput> skipped;
  uint64_t samples = 0;
  uint64_t ignored_files = 0;  // files that are not inputs of the layout (e.g. .txt)
  uint64_t bytes_in = 0;       // source bytes read
  uint64_t bytes_out = 0;      // shard and manifest bytes written
  uint64_t shards = 0;
  uint64_t groups = 0;  // with group_by: the groups the split assigned
  double seconds = 0;
  bool dry_run = false;
  bool dictionary = false;     // a dictionary was trained and used
  std::string codec = "zstd";  // how arrays were stored: "zstd" or "raw"
  // With ConvertOptions::parts: the part (its planned slice of the sample order), the
  // samples of the whole dataset, and whether this run converted it.
  PartInfo part;
  uint64_t part_of = 0;
  enum class PartState { kConverted, kComplete, kMerged } part_state = PartState::kConverted;
  // With an s3:// dest: where the dataset went, and the objects put there.
  std::string uploaded_to;
  uint64_t uploaded_objects = 0;
};

// What the pipeline is doing; reported from the calling thread.
struct Progress {
  const char* phase = "";  // "scan", "inspect", "convert"
  uint64_t done = 0;
  uint64_t total = 0;
  uint64_t bytes_in = 0;
};

class ProgressSink {
 public:
  virtual ~ProgressSink() = default;
  // Called often (up to once per sample); implementations throttle their own output.
  virtual void OnProgress(const Progress& p) = 0;
};

Result<ConvertSummary> Convert(const ConvertOptions& options, ProgressSink* progress = nullptr);

// "train=0.8,val=0.1,test=0.1": names unique, fractions > 0 summing to 1 (+-1e-6).
Result<std::vector<std::pair<std::string, double>>> ParseSplitSpec(const std::string& spec);
// "128x128x128" or "512x512": 2 or 3 positive sizes.
Result<Shape> ParsePatchSize(const std::string& text);
// Multi-line human summary (samples per split, classes, bytes, ratio, seconds, files/s).
std::string FormatSummary(const ConvertSummary& s);

}  // namespace shardify::convert
