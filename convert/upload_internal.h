// Converting into an object store: the dataset is written to a local staging folder as
// usual, then its objects are put under the s3:// location, the manifest last, so a
// reader never opens a dataset whose shards are not all there.
#pragma once

#include "base/status.h"
#include "convert/convert.h"

namespace shardify::convert::detail {

// Convert() for an s3:// `options.dest`. The staging folder is
// <cache dir>/uploads/<name>-<pid> (SHARDIFY_CACHE_DIR, see storage/remote.h), removed
// once the upload is done (kept, and named in the error, when it fails). Refused: an
// http(s):// dest (no uploads), converting in parts, and a location that already has a
// manifest unless `overwrite`.
Result<ConvertSummary> ConvertToObjectStore(const ConvertOptions& options, ProgressSink* progress);

}  // namespace shardify::convert::detail
