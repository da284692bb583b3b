// DatasetWriter: streaming append of samples into shards, manifest written last.
//
// Typical use (single thread):
//   ASSIGN_OR_RETURN(auto w, DatasetWriter::Create(dir, fields, options));
//   for (...) RETURN_IF_ERROR(w->Append(std::move(sample)));
//   RETURN_IF_ERROR(w->Finish());
// Parallel use: each thread owns an Encoder (w->NewEncoder()) and encodes samples;
// one thread appends the EncodedSamples in order. Output bytes depend only on the
// samples, their order and the options, never on the thread count.
//
// Crash safety: shards are written as "<name>.tmp", fsynced and renamed; the manifest is
// written last by rename, then the directory is fsynced. A writer destroyed before
// Finish() removes every file it created, so no partial dataset looks complete.
// One writer per destination: the directory is locked (`<dir>/.shardify.lock`, released
// with the writer or its process, also after kill -9), so a second writer fails (kBusy).
// Overwrite is atomic: the new dataset is written beside the old one, which stays
// complete and readable until Finish() switches to the new one (an atomic directory
// exchange where the file system has it). Details: format/destination_internal.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "format/layout.h"
#include "format/manifest.h"
#include "format/parts.h"
#include "format/types.h"

namespace shardify {

// One field's value in a sample. Build with the factories.
struct FieldValue {
  FieldKind kind = FieldKind::kNdarray;
  std::vector<uint8_t> bytes;  // ndarray: the elements, row-major; string/bytes: payload
  Shape shape;                 // ndarray only
  int64_t i = 0;               // int
  double f = 0;                // float

  static FieldValue Array(std::vector<uint8_t> data, Shape shape);
  static FieldValue Int(int64_t v);
  static FieldValue Float(double v);
  static FieldValue String(std::string s);
  static FieldValue Bytes(std::vector<uint8_t> b);
};

// A sample: one value per schema field, in schema order, and the split it belongs to.
// Samples of one split must be appended as one contiguous run.
struct SampleInput {
  std::string split = "train";
  std::vector<FieldValue> values;
};

struct WriterOptions {
  uint64_t target_shard_bytes = 256ull << 20;  // a shard is closed once it reaches this
  // How ndarray blobs are stored (FORMAT.md 3.2). kZstd: each blob is compressed, and the
  // frame kept when stored <= raw * min_ratio, else the blob is stored raw. kRaw: every
  // blob is stored raw (64-byte aligned): larger, and read by a copy, without
  // decompression. kZstdDict is not a choice here: TrainDictionary gives a field one.
  Codec codec = Codec::kZstd;
  int level = 3;  // compression level of the codec (zstd: 1..19); a codec without levels ignores it
  // Levels of single ndarray fields instead of `level`, e.g. {{"mask", 9}}: label maps
  // compress much better at higher levels, at little cost.
  std::vector<std::pair<std::string, int>> field_levels;
  double min_ratio = 0.95;    // a compressing codec keeps a blob that shrinks to this or below
  bool compute_stats = true;  // per-field min/max/mean/std into the manifest
  bool overwrite = false;     // replace an existing dataset at the destination
  // Names of further files that belong to a dataset at the destination (e.g.
  // "skipped.tsv"): written with WriteCompanion, replaced and removed with the dataset.
  std::vector<std::string> companions;
  bool fsync = true;  // fsync shards, manifest and directory
  std::vector<std::string> classes;
  Provenance provenance;
  // Set (count > 0) to write one part of a dataset written in parts (format/parts.h):
  // samples are numbered from part.first_sample (splits, shard indices and manifest
  // entries), the part keys join the provenance, and Finish() writes `part.sfm` instead of
  // `manifest.sfm`. The destination is then the part's directory (PartDir).
  PartInfo part;
};

// When a zstd dictionary pays (TrainDictionary), the rule `shardify --dict` (auto) and the
// Python Writer share: ndarray samples of at most kSmallSampleBytes (28x28 digits,
// thumbnails; these also gain from a higher level at little cost, while large ones would
// mostly pay time), at least kDictionaryMinSamples of them, learnt from at most
// kDictionaryMaxSamples.
inline constexpr uint64_t kSmallSampleBytes = 64 << 10;
// The provenance option the writer adds when TrainDictionary gave fields raw literals:
// their names, comma-separated (e.g. raw_literals=image).
inline constexpr char kRawLiteralsKey[] = "raw_literals";
inline constexpr size_t kDictionaryMinSamples = 1000;
inline constexpr size_t kDictionaryMaxSamples = 2000;

// Opaque result of encoding one sample; hand it to DatasetWriter::Append in order.
struct EncodedSample;
struct EncodedSampleDeleter {
  void operator()(EncodedSample* p) const;  // defined where EncodedSample is complete
};
using EncodedSamplePtr = std::unique_ptr<EncodedSample, EncodedSampleDeleter>;

// Per-thread compressor state. Not thread-safe; one per thread. Must not outlive its writer.
class Encoder {
 public:
  virtual ~Encoder() = default;
  // Validates `sample` against the schema (kinds, dtype sizes, shapes) and compresses it.
  // Errors name the field. `sample` is consumed.
  virtual Result<EncodedSamplePtr> Encode(SampleInput&& sample) = 0;
};

class DatasetWriter {
 public:
  // Locks and prepares `dir` (created if missing). Refuses a directory another writer
  // holds (kBusy), one holding a dataset unless options.overwrite (kAlreadyExists), and a
  // non-empty directory that is not a dataset. With overwrite, the previous dataset stays
  // in place until Finish().
  static Result<std::unique_ptr<DatasetWriter>> Create(const std::string& dir, std::vector<FieldSpec> fields,
                                                       const WriterOptions& options = {});
  virtual ~DatasetWriter() = default;

  // Trains a zstd dictionary for ndarray field `field` from `samples` (raw arrays, filtered
  // here as the field's blobs are) and uses it for every blob of that field, with raw
  // literals where they cost few bytes on these samples (faster to decode; see
  // format/codec_internal.h); the fields that get them are named in the provenance's
  // kRawLiteralsKey option. Must precede NewEncoder() and Append().
  // A dictionary that fails to train is an error; callers may fall back to none.
  virtual Status TrainDictionary(const std::string& field, const std::vector<std::vector<uint8_t>>& samples,
                                 size_t dict_bytes = 64 << 10) = 0;

  virtual std::unique_ptr<Encoder> NewEncoder() = 0;

  virtual Status Append(EncodedSamplePtr sample) = 0;
  // Encodes with an internal encoder, then appends.
  virtual Status Append(SampleInput&& sample) = 0;

  // Writes companion file `name` (one of options.companions) into the new dataset, which
  // it joins at Finish(). Must precede Finish().
  virtual Status WriteCompanion(const std::string& name, const void* data, size_t size) = 0;

  // Closes the last shard, writes the manifest and, on overwrite, switches the destination
  // to the new dataset. After an error, the writer is unusable and its files are removed
  // when it is destroyed (a dataset it was to replace stays).
  virtual Status Finish() = 0;

  // Samples appended so far, and bytes written so far (shard files).
  virtual uint64_t samples_written() const = 0;
  virtual uint64_t bytes_written() const = 0;
  // Valid after Finish().
  virtual const Manifest& manifest() const = 0;
};

}  // namespace shardify
