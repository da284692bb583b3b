// Converting into an object store: the dataset is written to a local staging folder as
// usual, then its objects are put under the s3:// location, the manifest last, so a
// reader never opens a dataset whose shards are not all there.
#pragma once

#include "base/status.h"
#include "convert/convert.h"
#include "format/parts.h"

namespace shardify::convert::detail {

// Convert() for an s3:// `options.dest`. The staging folder is
// <cache dir>/uploads/<name>-<pid> (SHARDIFY_CACHE_DIR, see storage/remote.h), removed
// once the upload is done (kept, and named in the error, when it fails). Refused: an
// http(s):// dest (no uploads), and a location that already has a manifest unless
// `overwrite`, which then deletes the shards of the dataset there that the new one does
// not name, after its manifest is put. A part (o.parts > 0) is put under parts/ at the
// location, its part.sfm last; a part the location holds already is judged as a local
// one would be (converted again only with `overwrite`, objects of its earlier copy
// deleted), and a dataset merged there from such parts makes a part run do nothing.
Result<ConvertSummary> ConvertToObjectStore(const ConvertOptions& options, ProgressSink* progress);

// Merge() for an s3:// `dest`: the objects under parts/ (and the manifest, if any) are
// fetched into a staging folder, merged there by the rules of a local merge (which checks
// every part and shard), and the dataset is put back, the manifest last; then the parts'
// objects are deleted. The dataset passes through local disk once, down and up.
Result<MergeSummary> MergeInObjectStore(const std::string& dest, bool fsync);

}  // namespace shardify::convert::detail
