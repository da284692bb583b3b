#include "format/dataset.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <list>
#include <mutex>
#include <optional>

#include "base/checksum.h"
#include "base/file.h"
#include "format/codec_internal.h"
#include "format/shard_file_internal.h"
#include "storage/remote.h"

namespace shardify {

const char* IoModeName(IoMode m) { return m == IoMode::kPread ? "pread" : "mmap"; }

std::optional<IoMode> ParseIoMode(std::string_view name) {
  if (name == "mmap") return IoMode::kMmap;
  if (name == "pread") return IoMode::kPread;
  return std::nullopt;
}

Decoder::Decoder() : codecs_(std::make_unique<detail::CodecContext>()) {}
Decoder::~Decoder() = default;

struct Dataset::Impl {
  std::vector<uint64_t> shard_starts;  // first sample of each shard
  std::vector<uint64_t> shard_ends;    // one past its last (kept here, beside the starts, for batches)
  std::vector<std::shared_ptr<const detail::Dictionary>> dicts;
  mutable std::mutex mu;
  mutable std::vector<std::shared_ptr<const detail::MappedShard>> open;  // by shard number
  // The indices of every shard opened so far, open or closed since (by shard number).
  mutable std::vector<std::shared_ptr<const detail::CheckedIndex>> indices;
  // Every shard's last open object, also once closed, while anything still holds it.
  mutable std::vector<std::weak_ptr<const detail::MappedShard>> alive;
  size_t max_open = 0;  // ReadOptions::max_open_shards, or what 0 chose
  // SampleBatch calls so far, and the last call that pinned each shard's open object (so
  // that a batch pins each shard once without searching its pins).
  mutable uint64_t calls = 0;
  mutable std::vector<uint64_t> pinned_by;
  // max_open covers every shard: none is ever closed to make room, so the LRU order is not
  // kept and SampleBatch pins nothing; a shard that Forget() drops moves to `retired`,
  // where it lives as long as the Dataset, so views that a batch still holds stay valid.
  bool all_open = false;
  mutable std::vector<std::shared_ptr<const detail::MappedShard>> retired;
  mutable std::list<size_t> lru;  // front = most recent
  mutable std::vector<std::list<size_t>::iterator> lru_pos;
  uint64_t manifest_checksum = 0;                        // of the manifest file's bytes, as Open read them
  std::shared_ptr<const storage::RemoteDataset> remote;  // a remote dataset's objects and cache
  // A remote dataset larger than its cache (and max_open not covering every shard): a shard
  // read from the cache stays open only while a view or a batch holds it (LetGo), so that
  // the readers sharing the cache, in this process or others, hold only what they read.
  bool let_go = false;

  // Opens shard n of the dataset at `dir`. When that fails and the manifest now at `dir`
  // is not the one Open read (shardify --overwrite or a merge replaced the dataset since),
  // the error says so instead of blaming the shard, whose file is the new dataset's.
  // `known`: the shard's index as checked before (see MappedShard::Open), or null.
  // `whole`: a remote shard is fetched whole (batches), else maybe read by ranges.
  // `wait`: whether a full cache is waited on.
  Result<std::shared_ptr<const detail::MappedShard>> OpenShard(
      const std::string& dir, const Manifest& m, size_t n, const ReadOptions& o,
      std::shared_ptr<const detail::CheckedIndex> known, bool whole,
      storage::WaitForRoom wait = storage::WaitForRoom::kYes) const;

  // The last shard whose first sample is <= index (index < num_samples). A binary search
  // without branches: in a shuffled order each step's direction is a coin toss, which a
  // branch would mispredict half the time.
  size_t ShardOf(uint64_t index) const {
    const uint64_t* base = shard_starts.data();
    size_t n = shard_starts.size();
    while (n > 1) {
      const size_t half = n / 2;
      base = base[half] <= index ? base + half : base;
      n -= half;
    }
    return static_cast<size_t>(base - shard_starts.data());
  }
  // With `mu` held: the open shard n (marked most recently used), or null. A shard closed
  // to make room that a view or a batch still holds is taken back as it is, not opened again.
  const std::shared_ptr<const detail::MappedShard>* Touch(size_t n) const {
    if (!open[n]) {
      std::shared_ptr<const detail::MappedShard> held = alive[n].lock();
      if (!held) return nullptr;
      Keep(n, std::move(held));
    } else if (!all_open) {
      lru.splice(lru.begin(), lru, lru_pos[n]);
    }
    return &open[n];
  }
  // With `lock` holding `mu`, on return too: shard n, open, in `open` (valid while the lock
  // is held). A shard that is not open is opened and checked without the lock, its index
  // taken from `indices` when it was checked before, then kept. `whole` (batches): a shard
  // open by ranges is opened again, fetched whole.
  Result<const std::shared_ptr<const detail::MappedShard>*> Acquire(const std::string& dir, const Manifest& m,
                                                                    const ReadOptions& o, size_t n,
                                                                    std::unique_lock<std::mutex>& lock,
                                                                    bool whole) const {
    if (const auto* now = Touch(n); now != nullptr && !(whole && (*now)->ranged())) return now;
    std::shared_ptr<const detail::CheckedIndex> known = indices[n];
    auto open_shard = [&](storage::WaitForRoom wait) {
      lock.unlock();
      Result<std::shared_ptr<const detail::MappedShard>> r = OpenShard(dir, m, n, o, known, whole, wait);
      lock.lock();
      return r;
    };
    Result<std::shared_ptr<const detail::MappedShard>> opened = open_shard(storage::WaitForRoom::kNo);
    // A remote dataset's cache may be full of shards kept open here: close the least
    // recently used one (a shard that views or batches still hold stays) and try again;
    // with none left, wait for readers (batches here, other processes) to release some.
    while (!opened.ok() && opened.status().code() == StatusCode::kResourceExhausted && remote) {
      if (const auto* now = Touch(n); now != nullptr && !(whole && (*now)->ranged())) return now;  // opened meanwhile
      if (lru.empty()) {
        opened = open_shard(storage::WaitForRoom::kYes);
        break;
      }
      open[lru.back()].reset();
      lru.pop_back();
      opened = open_shard(storage::WaitForRoom::kNo);
    }
    if (!opened.ok()) return opened.status();
    Keep(n, std::move(opened).value());  // now open[n] is set: ours, or one another thread kept first
    return &open[n];
  }
  // With `mu` held (let_go): closes the shards read from the cache (those that a view or a
  // batch holds stay alive, and Touch takes them back).
  void LetGo() const {
    if (!let_go) return;
    for (auto it = lru.begin(); it != lru.end();) {
      if (open[*it] && !open[*it]->ranged()) {
        open[*it].reset();
        it = lru.erase(it);
      } else {
        ++it;
      }
    }
  }
  // Calls LetGo() when it goes out of scope (declared after the lock on `mu`).
  struct LetGoOnExit {
    const Impl& impl;
    ~LetGoOnExit() { impl.LetGo(); }
  };
  // With `mu` held: keeps `shard` open as number n (unless another thread was first, or
  // it replaces one open by ranges) and closes the least recently used beyond max_open
  // (its index stays).
  void Keep(size_t n, std::shared_ptr<const detail::MappedShard> shard) const {
    if (open[n] && open[n]->ranged() && !shard->ranged()) {  // views that hold the ranged one keep it
      open[n].reset();
      lru.erase(lru_pos[n]);
    }
    if (!open[n]) {
      if (alive[n].lock() != shard) pinned_by[n] = 0;  // a new object: no SampleBatch call has pinned it
      open[n] = std::move(shard);
      alive[n] = open[n];
      indices[n] = open[n]->index();
      lru.push_front(n);
      lru_pos[n] = lru.begin();
      while (lru.size() > max_open) {
        open[lru.back()].reset();  // closed once no SampleView holds it
        lru.pop_back();
      }
    }
  }
};

Dataset::Dataset(std::string dir, Manifest manifest, ReadOptions options)
    : dir_(std::move(dir)), manifest_(std::move(manifest)), options_(options), impl_(std::make_unique<Impl>()) {}

Dataset::~Dataset() = default;

Result<std::shared_ptr<const detail::MappedShard>> Dataset::Impl::OpenShard(
    const std::string& dir, const Manifest& m, size_t n, const ReadOptions& o,
    std::shared_ptr<const detail::CheckedIndex> known, bool whole, storage::WaitForRoom wait) const {
  Result<std::shared_ptr<const detail::MappedShard>> shard =
      detail::MappedShard::Open(dir, m, n, o, std::move(known), remote, whole, wait);
  if (shard.ok() || remote) return shard;
  const Result<std::vector<uint8_t>> now = ReadWholeFile(JoinPath(dir, kManifestFileName), kMaxManifestBytes);
  if (now.ok() && Checksum64(now->data(), now->size()) == manifest_checksum) return shard;
  return IOError(dir + ": the dataset was replaced after it was opened (by shardify --overwrite or a merge); open it " +
                 "again (" + shard.status().message() + ")");
}

size_t AutomaticMaxOpenShards(IoMode io) {
  if (io == IoMode::kMmap) return kAutomaticMappedShards;
  const uint64_t limit = OpenFileLimit();
  return static_cast<size_t>(std::clamp<uint64_t>(limit / 4, 16, kAutomaticMappedShards));
}

size_t Dataset::max_open_shards() const { return impl_->max_open; }

Result<std::unique_ptr<Dataset>> Dataset::Open(const std::string& location, const ReadOptions& options) {
  std::unique_ptr<storage::RemoteDataset> remote;
  std::string dir = location;
  std::vector<uint8_t> bytes;
  if (storage::IsRemote(location)) {
    ASSIGN_OR_RETURN(remote, storage::RemoteDataset::Open(location, options.remote));
    dir = remote->location().text;
    Result<std::vector<uint8_t>> fetched = remote->ReadObject(kManifestFileName, kMaxManifestBytes);
    if (!fetched.ok() && fetched.status().code() == StatusCode::kNotFound) {
      return NotFound(dir + ": not a shardify dataset (no " + kManifestFileName + ")");
    }
    ASSIGN_OR_RETURN(bytes, std::move(fetched));
  } else {
    if (!IsDirectory(dir)) return NotFound(dir + ": no such directory");
    if (!PathExists(JoinPath(dir, kManifestFileName))) {
      return NotFound(dir + ": not a shardify dataset (no " + kManifestFileName + ")");
    }
    ASSIGN_OR_RETURN(bytes, ReadWholeFile(JoinPath(dir, kManifestFileName), kMaxManifestBytes));
  }
  const std::string path = JoinPath(dir, kManifestFileName);
  ASSIGN_OR_RETURN(Manifest m, DecodeManifestFile(bytes.data(), bytes.size(), path));
  std::unique_ptr<Dataset> ds(new Dataset(dir, std::move(m), options));
  Impl& impl = *ds->impl_;
  impl.manifest_checksum = Checksum64(bytes.data(), bytes.size());
  impl.max_open = options.max_open_shards != 0 ? options.max_open_shards : AutomaticMaxOpenShards(options.io);
  if (remote) {
    uint64_t total = 0, largest = 0;
    for (const ShardInfo& s : ds->manifest_.shards) {
      total += s.size_bytes;
      largest = std::max(largest, s.size_bytes);
    }
    RETURN_IF_ERROR(remote->OpenCache(total, largest));
    // Open shards stay in the cache; no more may be open than it holds.
    if (options.max_open_shards == 0) impl.max_open = std::min<uint64_t>(impl.max_open, remote->ShardsHeld());
    impl.let_go = remote->cache()->limit() < total;
    impl.remote = std::move(remote);
  }
  for (const auto& s : ds->manifest_.shards) {
    impl.shard_starts.push_back(s.first_sample);
    impl.shard_ends.push_back(s.first_sample + s.num_samples);
  }
  impl.open.resize(ds->manifest_.shards.size());
  impl.indices.resize(ds->manifest_.shards.size());
  impl.pinned_by.resize(ds->manifest_.shards.size());
  impl.alive.resize(ds->manifest_.shards.size());
  impl.all_open = impl.max_open >= ds->manifest_.shards.size();
  impl.let_go = impl.let_go && !impl.all_open;
  impl.lru_pos.resize(ds->manifest_.shards.size());
  for (const auto& f : ds->manifest_.fields) {
    std::shared_ptr<const detail::Dictionary> d;
    if (!f.dictionary.empty()) {
      auto made = detail::Dictionary::Create(f.dictionary, 1);
      if (!made.ok()) return Corruption(path + ": field '" + f.name + "': " + made.status().message());
      d = std::move(made).value();
    }
    impl.dicts.push_back(std::move(d));
  }
  return ds;
}

Result<SampleView> Dataset::Sample(uint64_t index) const {
  if (index >= manifest_.num_samples)
    return OutOfRange("sample " + std::to_string(index) + " is past the end (" + std::to_string(manifest_.num_samples) +
                      " samples)");
  const size_t n = impl_->ShardOf(index);
  SampleView v;
  v.dataset_ = this;
  v.index_ = index;
  v.local_ = index - impl_->shard_starts[n];
  std::unique_lock<std::mutex> lock(impl_->mu);
  const Impl::LetGoOnExit let_go{*impl_};
  ASSIGN_OR_RETURN(const auto* shard, impl_->Acquire(dir_, manifest_, options_, n, lock, /*whole=*/false));
  v.owner_ = *shard;
  v.shard_ = v.owner_.get();
  return v;
}

Status Dataset::SampleBatch(const uint64_t* indices, size_t n, SampleView* out,
                            std::vector<std::shared_ptr<const void>>* pins) const {
  const Impl& impl = *impl_;
  size_t shard = SIZE_MAX;
  uint64_t lo = 0, hi = 0;  // sample range of `shard`
  const detail::MappedShard* current = nullptr;
  std::unique_lock<std::mutex> lock(impl.mu);
  const Impl::LetGoOnExit let_go{impl};
  const uint64_t call = ++impl.calls;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t index = indices[i];
    if (shard == SIZE_MAX || index < lo || index >= hi) {
      if (index >= manifest_.num_samples)
        return OutOfRange("sample " + std::to_string(index) + " is past the end (" +
                          std::to_string(manifest_.num_samples) + " samples)");
      shard = impl.ShardOf(index);
      lo = impl.shard_starts[shard];
      hi = impl.shard_ends[shard];
      Result<const std::shared_ptr<const detail::MappedShard>*> open =
          impl.Acquire(dir_, manifest_, options_, shard, lock, /*whole=*/true);
      if (!open.ok()) return open.status().WithContext("sample " + std::to_string(index));
      current = (*open)->get();
      if (!impl.all_open && impl.pinned_by[shard] != call) {  // not yet pinned by this call
        impl.pinned_by[shard] = call;
        pins->push_back(**open);
      }
    }
    SampleView& v = out[i];
    v.dataset_ = this;
    v.shard_ = current;
    v.owner_.reset();
    v.index_ = index;
    v.local_ = index - lo;
  }
  return Status::Ok();
}

void Dataset::Forget(const detail::MappedShard* shard) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  const size_t n = shard->number();
  if (impl_->alive[n].lock().get() != shard) return;  // opened anew since
  impl_->alive[n].reset();                            // never taken back
  impl_->indices[n].reset();                          // the file changed: the next open checks everything anew
  if (impl_->open[n].get() != shard) return;          // closed already
  if (impl_->all_open) impl_->retired.push_back(std::move(impl_->open[n]));
  impl_->open[n].reset();
  impl_->lru.erase(impl_->lru_pos[n]);
}

Status Dataset::CheckShard(size_t n) const {
  if (n >= manifest_.shards.size()) return OutOfRange("no shard " + std::to_string(n));
  return impl_->OpenShard(dir_, manifest_, n, options_, nullptr, /*whole=*/true).status();
}

Status Dataset::CheckSampleCounts(uint64_t first, uint64_t count) const {
  const uint64_t per_sample = std::max<uint64_t>(1, kMinIndexBytesPerField * manifest_.fields.size());
  for (const ShardInfo& s : manifest_.shards) {
    if (s.num_samples == 0 || s.first_sample >= first + count || s.first_sample + s.num_samples <= first) continue;
    const std::string path = JoinPath(dir_, s.file_name);
    // A remote shard's size is the manifest's: a download of another size is refused.
    Result<uint64_t> size = impl_->remote ? Result<uint64_t>(s.size_bytes) : FileSize(path);
    if (!size.ok()) {
      return size.status().code() == StatusCode::kNotFound ? Corruption(path + ": shard is missing") : size.status();
    }
    const uint64_t frame = kShardHeaderSize + kShardFooterSize;
    const uint64_t most = (*size > frame ? *size - frame : 0) / per_sample;
    if (s.num_samples > most) {
      return Corruption(path + ": the manifest claims " + std::to_string(s.num_samples) + " samples, but the shard's " +
                        std::to_string(*size) + " bytes hold at most " + std::to_string(most));
    }
  }
  return Status::Ok();
}

const storage::RemoteDataset* Dataset::remote() const { return impl_->remote.get(); }

size_t Dataset::ShardOfSample(uint64_t index) const { return impl_->ShardOf(index); }

Status Dataset::Prefetch(size_t n) const {
  if (!impl_->remote || n >= manifest_.shards.size()) return Status::Ok();
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    const std::shared_ptr<const detail::MappedShard> held = impl_->open[n] ? impl_->open[n] : impl_->alive[n].lock();
    if (held && !held->ranged()) return Status::Ok();  // open from a local copy
  }
  // Not waited for: the batch that reads it waits, and a prefetch that failed is no error.
  return detail::FetchShard(*impl_->remote, manifest_, n, storage::WaitForRoom::kNo).status();
}

const detail::Dictionary* Dataset::dictionary(size_t field) const { return impl_->dicts[field].get(); }

size_t Dataset::open_shards() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->lru.size();
}

}  // namespace shardify
