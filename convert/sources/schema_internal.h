// Schema, split assignment and sample building for the pipeline (internal).
#pragma once

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "convert/preprocess/preprocess_internal.h"
#include "convert/sources/case.h"
#include "convert/sources/fg_locations.h"
#include "convert/sources/source.h"
#include "format/manifest.h"
#include "format/writer.h"

namespace shardify::convert::detail {

// Positions of the fields in the schema; -1 when absent.
struct Schema {
  std::vector<FieldSpec> fields;
  int image = -1, mask = -1, label = -1, path = -1;
  int first_scalar = -1;
  std::vector<FieldKind> scalar_kinds;
  int image_geometry = -1, image_header = -1;  // spacing, origin, direction follow
  int mask_geometry = -1, mask_header = -1;
  size_t geometry_dims = 0;  // S
  bool mask_geometry_dims_match = true;
  int fg_locations = -1;  // "mask.fg_locations" (with --patch-size)
  uint64_t fg_cap = 0;    // at most this many rows per class
  uint64_t fg_seed = 0;
  RecordFields record;  // preprocessing record (FinishSchema)
};

// Field specs with a "role" meta (none for an empty role).
FieldSpec NdarrayField(const std::string& name, DType t, Shape shape, const std::string& role);
FieldSpec ScalarField(const std::string& name, FieldKind k, const std::string& role);
// f64 values, little-endian, as an array of `shape` (empty: [v.size()]).
FieldValue Doubles(const std::vector<double>& v, Shape shape = {});

// Builds the schema from the infos of the cases that inspected cleanly (`ok[i]`).
// Image and mask take the smallest dtype that holds every case's values (PromoteDTypes).
// A case that does not fit (rank or geometry rank differ from the first case) gets its
// error in `errors[i]` and `ok[i]` cleared.
Schema BuildSchema(const SourcePlan& plan, const std::vector<CaseInfo>& infos, std::vector<bool>& ok,
                   std::vector<Status>& errors);

// Assigns a split to every case without one (stratified by label, seeded) and returns
// the case order: grouped by split in `split order`, input order within a split.
// Only cases with ok[i] take part. With `groups` (a key per case, from GroupKeys), whole
// groups are assigned instead of cases (AssignGroupSplits).
std::vector<size_t> AssignSplits(std::vector<CaseInput>& cases, const std::vector<bool>& ok,
                                 const std::vector<std::pair<std::string, double>>& split, uint64_t seed,
                                 std::vector<std::string>* split_order, const std::vector<std::string>& groups = {});

// --group-by: the group key of every case with ok[i] ("" for the others). `group_by` is a
// layout's natural group ("case" for rle and nnunet, "day" for rle) or else an ECMAScript
// regular expression searched in each case's name (the value of its `path` field); its
// first capture group, or the whole match, is the key. InvalidArgument for a keyword the
// layout lacks, a bad expression, or a name it does not match (naming the input).
Result<std::vector<std::string>> GroupKeys(const SourcePlan& plan, const std::vector<bool>& ok,
                                           const std::string& group_by);

// Assigns a split to every group of cases without one: a group part of which the layout
// already placed (a csv split column) follows that split; the others are stratified by their
// most frequent label, shuffled (seeded), and each goes to the split furthest below its
// share of the stratum's samples. Deterministic for a seed.
void AssignGroupSplits(std::vector<CaseInput>& cases, const std::vector<bool>& ok,
                       const std::vector<std::pair<std::string, double>>& split, uint64_t seed,
                       const std::vector<std::string>& groups);

// Fisher-Yates with `rng`, the same on every platform and standard library.
void SeededShuffle(std::vector<size_t>& v, std::mt19937_64& rng);

// With a non-empty `patch` (spatial, e.g. {D, H, W}): sets the chunk shape of the image
// and mask fields to ChooseChunkShape(largest, {1, patch...}, dtype size), where `largest`
// is the element-wise maximum of the shapes of the cases with ok[i] (the largest array
// bounds every chunk, so a -1 dimension is sized for its biggest case). With a mask and
// fg_cap > 0 it appends the field "mask.fg_locations" (i32 [-1, 1 + S], role
// fg_locations). Fails when the patch rank is not the image's spatial rank.
Status ApplyPatchSize(Schema& schema, const std::vector<CaseInfo>& infos, const std::vector<bool>& ok,
                      const Shape& patch, uint64_t fg_cap, uint64_t seed);

// Foreground locations of one case's mask (convert/sources/fg_locations.h).
using convert::FgLocations;

// Builds the sample for a decoded case. Errors name the case.
Result<SampleInput> BuildSample(const Schema& schema, const CaseInput& in, CaseData&& data);

}  // namespace shardify::convert::detail
