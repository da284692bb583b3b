// Conversion in parts: N runs (machines of a Slurm array, a Kubernetes indexed job, a
// shell loop) each convert one part of a dataset into DST/parts/, then one Merge makes
// DST the dataset, the same samples in the same order as a conversion in one run.
//
//   for k in 1 2 3 4: ConvertOptions o = ...; o.part = k; o.parts = 4; Convert(o);
//   ASSIGN_OR_RETURN(MergeSummary s, Merge(o.dest));
//
// Every part enumerates the whole source and reads every header (as one run does), so all
// parts agree on the schema, the split assignment, the sample order, the automatic level
// and dictionary choice, and train the same dictionary from the same evenly spaced inputs;
// part K then decodes and writes only the K-th contiguous slice of the sample order
// (grouped by split, input order within a split). A part is complete once its part.sfm is
// written (format/parts.h); a run of a complete part converts nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "base/status.h"
#include "format/parts.h"

namespace shardify::convert {

// Reads an environment variable (std::getenv, or a table in tests); nullptr when unset.
using EnvLookup = std::function<const char*(const char*)>;

// "K/N" (1 <= K <= N <= 99999) -> {K, N}. "auto": from the launcher's environment, the
// first of: RANK and WORLD_SIZE (torchrun, a Kubernetes PyTorchJob), SLURM_ARRAY_TASK_ID
// with SLURM_ARRAY_TASK_MIN and SLURM_ARRAY_TASK_COUNT (a Slurm array of consecutive
// ids), SLURM_PROCID and SLURM_NTASKS (srun); K is the 0-based rank + 1. Errors say what
// is missing or wrong (InvalidArgument).
Result<std::pair<uint32_t, uint32_t>> ParsePart(const std::string& text, const EnvLookup& env);

// Merges the parts in `dest`/parts into the dataset `dest`, with their skipped.tsv
// (format/parts.h MergeParts: checks, renames shards, writes the manifest last).
Result<MergeSummary> Merge(const std::string& dest, bool fsync = true);

// Lines the CLI prints after a merge.
std::string FormatMergeSummary(const std::string& dest, const MergeSummary& s);

}  // namespace shardify::convert
