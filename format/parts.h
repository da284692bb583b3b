// Datasets written in parts and merged (FORMAT.md section 6).
//
// N writers, on one machine or several sharing a file system, each write one part: a
// contiguous range of the dataset's samples, numbered as in the whole dataset, into
//   DIR/parts/KKKKK-of-NNNNN/   shard-00000.sfs ... and part.sfm (written last)
// with a DatasetWriter whose WriterOptions::part is set. A part is complete once its
// part.sfm exists (the writer's crash safety: shards by tmp + rename, the part manifest
// last, the part directory locked while written). MergeParts then makes DIR a dataset:
//
//   ASSIGN_OR_RETURN(MergeSummary s, MergeParts("out/fmnist"));
//
// It checks that the parts are all there, once each, and agree (same format version,
// fields with their dictionaries, classes, converter, source and options), moves their
// shards into DIR renumbered shard-00000.sfs, shard-00001.sfs, ... (a rename each; blobs
// are never decoded), combines splits and statistics, writes DIR/manifest.sfm last and
// removes DIR/parts. A part that wrote fewer samples than planned (inputs skipped) shifts
// the numbers of the parts after it; their shards are then copied once with the shard
// index's first_sample rewritten (MergeSummary::shards_rewritten).
// A merge interrupted at any point leaves no manifest (or the complete dataset) and can be
// run again; it finds each shard in its part directory or already moved.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/manifest.h"

namespace shardify {

// One part of a dataset written in parts. count == 0: not a part.
struct PartInfo {
  uint32_t index = 0;         // 1..count
  uint32_t count = 0;         // 1..kMaxParts
  uint64_t first_sample = 0;  // planned number of its first sample in the whole dataset
  uint64_t samples = 0;       // planned samples; fewer are written when inputs are skipped
  bool operator==(const PartInfo& o) const;
};

// "2/4".
std::string PartName(const PartInfo& part);
// DIR/parts/00002-of-00004.
std::string PartDir(const std::string& dataset_dir, const PartInfo& part);
// Checks 1 <= index <= count <= kMaxParts.
Status ValidatePart(const PartInfo& part);

// The provenance keys of a part manifest (part, part_first_sample, part_samples), appended
// by the writer; PartOf reads them back (InvalidArgument naming `where` when absent or bad).
void AddPartKeys(const PartInfo& part, Provenance* provenance);
Result<PartInfo> PartOf(const Manifest& part_manifest, const std::string& where);
// The provenance key a merged dataset gets instead: "parts" = N.
inline constexpr char kPartsKey[] = "parts";

// What makes `b` another conversion than `a` (the manifests of two parts, or of a part and
// a merged dataset): format version, fields (with their zstd dictionaries unless
// `dictionaries` is false), classes, converter, source, or an option other than the part
// keys and kRawLiteralsKey (an outcome of the dictionaries, not an option asked for). ""
// when they are parts of one conversion. Says what differs, `b`'s value first.
std::string ConversionDifference(const Manifest& a, const Manifest& b, bool dictionaries = true);

// Reads and verifies `part_dir`/part.sfm (checksum, verifier, ranges, part keys).
// NotFound when there is none: the part is not complete.
Result<Manifest> ReadPartManifest(const std::string& part_dir);

struct MergeOptions {
  bool fsync = true;
  // Companion text tables of the parts (e.g. "skipped.tsv"): each part's file, in part
  // order, is appended to DIR/<name>, its first line (the header) kept once.
  std::vector<std::string> tables;
  // Companion files that every part writes alike (e.g. "nnUNetPlans.json"): the first
  // part's becomes DIR/<name>.
  std::vector<std::string> copies;
};

struct MergeSummary {
  uint32_t parts = 0;
  uint64_t samples = 0;
  uint64_t shards = 0;
  std::vector<SplitInfo> splits;
  uint64_t shards_rewritten = 0;  // copied with a new first_sample (inputs skipped before them)
  uint64_t bytes_rewritten = 0;
  uint64_t table_rows = 0;      // rows of the merged tables (skipped inputs)
  bool already_merged = false;  // DIR already was the dataset merged from its parts
};

// Merges DIR/parts/* into the dataset DIR (see above). Refuses, with an error naming the
// part: a missing or incomplete part (NotFound), a part being written (Busy), a
// duplicate, a part of another count or conversion, a part directory (or parts/) that is
// a symbolic link, a changed shard (InvalidArgument or Corruption). Hidden entries of
// parts/ (".name") are no part's: passed over, and left there. A DIR already merged is
// reported as such (already_merged), not an error; a DIR holding a dataset that was not
// written in parts is AlreadyExists.
Result<MergeSummary> MergeParts(const std::string& dir, const MergeOptions& options = {});

// Removes DIR/parts, the parts of a run given up: each part directory locked (Busy while
// one is being written), its part manifest removed first, so that an interruption leaves
// no part that looks complete with shards gone; parts/ itself goes unless hidden entries
// are left in it. Nothing there: Ok.
Status RemoveParts(const std::string& dir);

}  // namespace shardify
