// Converting into an object store: the dataset is written to a local staging folder as
// usual and its objects are put under the s3:// location, the manifest last, so a reader
// never opens a dataset whose shards are not all there. Where the location holds nothing
// yet, each shard goes up as soon as it is finished, while the conversion goes on.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "convert/convert.h"
#include "format/parts.h"

namespace shardify::convert::detail {

// Puts the shards a conversion finishes in folder `dir` while it runs: a thread looks at
// the folder every 200 ms and hands each new shard-NNNNN.sfs to `put` (its final name
// appears only once it is complete: the writer renames it into place; its .tmp is
// passed over). cancel() is the flag to give the conversion: it is set when a put fails
// or the caller's own flag (`caller_cancel`, may be null) is set.
class EarlyUploads {
 public:
  using Put = std::function<Status(const std::string& name)>;
  EarlyUploads(std::string dir, Put put, const std::atomic<bool>* caller_cancel);
  ~EarlyUploads();
  EarlyUploads(const EarlyUploads&) = delete;
  EarlyUploads& operator=(const EarlyUploads&) = delete;

  const std::atomic<bool>* cancel() const { return &cancel_; }
  // Stops the thread (a look in progress ends first); then the first put's error, if any.
  // Shards finished after the last look are left to the caller.
  Status Stop();
  // The names put, in order (read after Stop).
  const std::vector<std::string>& put() const { return put_; }

 private:
  void Run();
  Status Pass();

  const std::string dir_;
  const Put put_file_;
  const std::atomic<bool>* caller_cancel_;
  std::atomic<bool> cancel_{false};
  std::mutex mu_;
  std::condition_variable wake_;
  bool done_ = false;
  Status error_;
  std::vector<std::string> put_;  // written by the thread, read after Stop
  std::thread thread_;
};

// Convert() for an s3:// `options.dest`. The staging folder is
// <cache dir>/uploads/<name>-<pid> (SHARDIFY_CACHE_DIR, see storage/remote.h), held by its
// lock file <folder>.lock while the run uses it, and removed once the upload is done
// (kept, and named in the error, when an upload after the conversion fails; a put that
// fails during it cancels the conversion, and the shards put are deleted). Each run first
// removes the staging folders in uploads/ whose lock no process holds (runs killed or
// failed before). Before converting, an empty object is put under the location and
// deleted, so that a missing bucket or refused writes fail first. Refused: an
// http(s):// dest (no uploads), and a location that already has a manifest unless
// `overwrite`, which then deletes the shards of the dataset there that the new one does
// not name, after its manifest is put. A part (o.parts > 0) is put under parts/ at the
// location, its part.sfm last; a part the location holds already is judged as a local
// one would be (converted again only with `overwrite`, objects of its earlier copy
// deleted), and a dataset merged there from such parts makes a part run do nothing.
// Every object fetched is bounded: manifests by kMaxManifestBytes, listings by what the
// operation can need.
Result<ConvertSummary> ConvertToObjectStore(const ConvertOptions& options, ProgressSink* progress);

// Merge() for an s3:// `dest`: the objects under parts/ (and the manifest, if any) are
// fetched into a staging folder (as above), each refused past the size its listing gives,
// merged there by the rules of a local merge (which checks every part and shard), and the
// dataset is put back, the manifest last; then the parts' objects are deleted. The
// dataset passes through local disk once, down and up.
Result<MergeSummary> MergeInObjectStore(const std::string& dest, bool fsync);

}  // namespace shardify::convert::detail
