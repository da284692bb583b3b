// Schema, split assignment and sample building for the pipeline (internal).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "convert/case.h"
#include "convert/source.h"
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
  size_t geometry_dims = 0;                    // S
  bool mask_geometry_dims_match = true;
};

// Builds the schema from the infos of the cases that inspected cleanly (`ok[i]`).
// A case that does not fit (dtype, rank or geometry rank differ from the first case)
// gets its error in `errors[i]` and `ok[i]` cleared.
Schema BuildSchema(const SourcePlan& plan, const std::vector<CaseInfo>& infos, std::vector<bool>& ok,
                   std::vector<Status>& errors);

// Assigns a split to every case without one (stratified by label, seeded) and returns
// the case order: grouped by split in `split order`, input order within a split.
// Only cases with ok[i] take part.
std::vector<size_t> AssignSplits(std::vector<CaseInput>& cases, const std::vector<bool>& ok,
                                 const std::vector<std::pair<std::string, double>>& split, uint64_t seed,
                                 std::vector<std::string>* split_order);

// Builds the sample for a decoded case. Errors name the case.
Result<SampleInput> BuildSample(const Schema& schema, const CaseInput& in, CaseData&& data);

}  // namespace shardify::convert::detail
