// The pipeline's side of a conversion in parts (internal; see parts.h).
#pragma once

#include <string>
#include <vector>

#include "convert/convert.h"
#include "convert/sources/source.h"
#include "format/writer.h"

namespace shardify::convert::detail {

// The dataset's companion listing the inputs left out (--on-error skip).
inline constexpr char kSkippedFile[] = "skipped.tsv";

// Starts part o.part of o.parts of a conversion whose sample order has `samples` entries,
// and returns the directory to write it to (dest/parts/KKKKK-of-NNNNN).
// Sets w->part to its slice of that order (contiguous; sizes differ by at most one, the
// first parts being larger), adds the input list's size and XXH3 digest to the provenance
// (keys inputs, inputs_xxh3: parts of a changed source do not merge), and looks at what
// o.dest holds: nothing for this part, or a part that is not complete: convert it (the
// writer removes what is there, its part.sfm first); this part complete with the same
// conversion, or the dataset merged from such parts: nothing to do, sum->part_state says
// which and the summary describes what is there. Anything else is refused
// (AlreadyExists), except that overwrite converts a part again. Reads only. Sets
// sum->part and part_of; a part K > 1 leaves the inputs that failed before encoding
// (every part finds them) to part 1's list.
Result<std::string> StartPart(const ConvertOptions& o, const SourcePlan& plan, const std::vector<FieldSpec>& fields,
                              uint64_t samples, WriterOptions* w, ConvertSummary* sum);

}  // namespace shardify::convert::detail
