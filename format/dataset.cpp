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
#include "format/chunk_grid.h"
#include "format/codec_internal.h"
#include "format/shard_index_internal.h"
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

namespace detail {

// A shard's index as read and checked completely once: its bytes, copied out of the file,
// and the column views into them. The index is copied because it is read again for every
// sample: offsets read from a file that is rewritten later would no longer be the ones
// that were checked. It outlives the shard's file: a shard closed to stay within
// max_open_shards opens again without reading and checking its index again.
struct CheckedIndex {
  std::vector<uint8_t> bytes;
  std::vector<ColumnView> columns;
};

// Reads a shard's ends (`size` bytes, read through `read`) and checks them: the frame,
// then that the footer names the manifest entry's format version and index checksum.
// Messages begin with `path`.
Result<ShardFooter> CheckedFooter(uint64_t size, const std::string& path, uint32_t version, uint64_t index_checksum,
                                  const std::function<Status(uint64_t, uint64_t, void*)>& read) {
  if (size < kShardHeaderSize + kShardFooterSize)  // before any arithmetic on offsets
    return Corruption(path + ": " + std::to_string(size) + " bytes is too small for a shard");
  uint8_t header[kShardHeaderSize], footer_bytes[kShardFooterSize];
  RETURN_IF_ERROR(read(0, sizeof header, header));
  RETURN_IF_ERROR(read(size - kShardFooterSize, sizeof footer_bytes, footer_bytes));
  RETURN_IF_ERROR(CheckShardEnds(header, footer_bytes, size, path));
  const ShardFooter footer = DecodeShardFooter(footer_bytes);
  if (footer.version != version)
    return Corruption(path + ": shard is version " + std::to_string(footer.version) + ", the manifest version " +
                      std::to_string(version));
  if (footer.index_checksum != index_checksum)
    return Corruption(path + ": index checksum in footer disagrees with the manifest");
  return footer;
}

// Shard n of a remote dataset as a held file of its cache. A download enters the cache
// only when its ends are those of the shard the manifest describes, so a stale or foreign
// object is never cached (opening checks the rest, as for a local shard). `wait`: whether
// a full cache is waited on (RemoteDataset::Local).
Result<std::shared_ptr<const storage::CachedFile>> FetchShard(const storage::RemoteDataset& remote, const Manifest& m,
                                                              size_t n, storage::WaitForRoom wait) {
  const ShardInfo& info = m.shards[n];
  return remote.Local(
      info.file_name, info.size_bytes, info.index_checksum,
      [&info, version = m.format_version](const std::string& tmp) -> Status {
        ASSIGN_OR_RETURN(std::unique_ptr<ReadableFile> f, ReadableFile::Open(tmp));
        return CheckedFooter(f->size(), tmp, version, info.index_checksum,
                             [&f](uint64_t offset, uint64_t size, void* dst) { return f->Read(offset, size, dst); })
            .status();
      },
      wait);
}

// One open shard: its file (mapped, or read with pread) and its checked index.
class MappedShard {
 public:
  // Opens shard n and checks its ends and footer against the manifest. With `known` (the
  // index checked when the shard was open before) the footer's index checksum must be the
  // one it was checked with, and the index is not read again; otherwise it is read and
  // checked completely.
  // A remote dataset's shard is read from its local copy in the cache, held there while
  // the shard is open; unless `whole` is false and the dataset reads by ranges
  // (RemoteDataset::ranges()) and the cache does not have it: then every read is a range
  // request. Messages name its URL. `wait`: see FetchShard.
  static Result<std::shared_ptr<const MappedShard>> Open(const std::string& dir, const Manifest& m, size_t n,
                                                         const ReadOptions& options,
                                                         std::shared_ptr<const CheckedIndex> known,
                                                         const std::shared_ptr<const storage::RemoteDataset>& remote,
                                                         bool whole, storage::WaitForRoom wait) {
    const ShardInfo& info = m.shards[n];
    std::shared_ptr<MappedShard> shard(new MappedShard(JoinPath(dir, info.file_name), info.file_name, n));
    std::string file = shard->path();
    if (remote != nullptr && !whole && remote->ranges()) {
      ASSIGN_OR_RETURN(shard->cached_, remote->Cached(info.file_name, info.size_bytes, info.index_checksum));
      if (!shard->cached_) shard->ranged_ = remote;
    } else if (remote != nullptr) {
      ASSIGN_OR_RETURN(shard->cached_, FetchShard(*remote, m, n, wait));
    }
    if (shard->cached_) file = shard->cached_->path();
    Status opened = shard->ranged_ ? Status::Ok() : shard->OpenFile(options.io, file);
    if (shard->ranged_) shard->size_ = info.size_bytes;  // Check() reads the footer where the manifest puts it
    if (opened.ok()) opened = shard->Check(m, info, options, std::move(known));
    if (opened.code() == StatusCode::kNotFound) return Corruption(shard->path() + ": shard is missing");
    if (!opened.ok()) return opened;
    return std::shared_ptr<const MappedShard>(std::move(shard));
  }

  const std::string& path() const { return path_; }
  const std::string& name() const { return name_; }
  size_t number() const { return number_; }
  const uint8_t* mapped() const { return map_ ? map_->data() : nullptr; }
  const ColumnView& column(size_t f) const { return columns_[f]; }
  const std::shared_ptr<const CheckedIndex>& index() const { return index_; }
  bool faulted() const { return map_ && map_->faulted(); }
  bool ranged() const { return ranged_ != nullptr; }

  // Copies [offset, offset + size) of the file into dst. The range was checked against the
  // file when the shard was opened; a file that shrank since gives IOError.
  Status Read(uint64_t offset, uint64_t size, void* dst) const {
    if (ranged_) return ranged_->ReadRange(name_, offset, size, dst);
    if (!map_) return file_->Read(offset, size, dst);
    if (size > 0) std::memcpy(dst, map_->data() + offset, size);
    return map_->FaultStatus();
  }

 private:
  MappedShard(std::string path, std::string name, size_t number)
      : path_(std::move(path)), name_(std::move(name)), number_(number) {}

  Status OpenFile(IoMode io, const std::string& file) {
    if (io == IoMode::kPread) {
      ASSIGN_OR_RETURN(file_, ReadableFile::Open(file));
      size_ = file_->size();
    } else {
      ASSIGN_OR_RETURN(map_, MappedFile::Open(file));
      size_ = map_->size();
    }
    return Status::Ok();
  }

  Status Check(const Manifest& m, const ShardInfo& info, const ReadOptions& options,
               std::shared_ptr<const CheckedIndex> known) {
    const std::string& p = path();
    if (ranged_ && known && options.verify_checksums) {
      // Checked when it was open before; each blob read by range is checked against its
      // checksum, so a changed object is caught there, one request fewer per reopening.
      index_ = std::move(known);
      columns_ = index_->columns;
      return Status::Ok();
    }
    if (size_ != info.size_bytes)
      return Corruption(p + ": shard is " + std::to_string(size_) + " bytes, manifest says " +
                        std::to_string(info.size_bytes));
    ASSIGN_OR_RETURN(const ShardFooter footer, CheckedFooter(size_, p, m.format_version, info.index_checksum,
                                                             [this](uint64_t offset, uint64_t size, void* dst) {
                                                               return Read(offset, size, dst);
                                                             }));
    if (known) {  // checked before, against the same manifest entry, size and index checksum
      index_ = std::move(known);
      columns_ = index_->columns;
      return Status::Ok();
    }
    auto index = std::make_shared<CheckedIndex>();
    index->bytes.resize(footer.index_length);  // CheckShardEnds: the index lies inside the file
    RETURN_IF_ERROR(Read(footer.index_offset, footer.index_length, index->bytes.data()));
    if (Checksum64(index->bytes.data(), index->bytes.size()) != footer.index_checksum)
      return Corruption(p + ": index checksum mismatch");
    RETURN_IF_ERROR(CheckShardIndex(index->bytes.data(), index->bytes.size(), m.fields, info.first_sample,
                                    info.num_samples, footer.index_offset, options.max_sample_bytes, p,
                                    &index->columns));
    index_ = std::move(index);
    columns_ = index_->columns;
    return Status::Ok();
  }

  std::string path_, name_;
  size_t number_;
  uint64_t size_ = 0;
  std::shared_ptr<const storage::CachedFile> cached_;     // a remote shard's local copy, held
  std::shared_ptr<const storage::RemoteDataset> ranged_;  // a remote shard read by range requests
  std::unique_ptr<MappedFile> map_;                       // IoMode::kMmap
  std::unique_ptr<ReadableFile> file_;                    // IoMode::kPread
  std::shared_ptr<const CheckedIndex> index_;
  std::vector<ColumnView> columns_;  // index_->columns, one pointer less on every sample's way
};

}  // namespace detail

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

size_t Dataset::open_shards() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->lru.size();
}

// ---- SampleView ----

namespace {
Status WrongKind(const Manifest& m, size_t field, const char* wanted) {
  if (field >= m.fields.size()) return InvalidArgument("no field number " + std::to_string(field));
  return InvalidArgument("field '" + m.fields[field].name + "' is " + FieldKindName(m.fields[field].kind) + ", not " +
                         wanted);
}

BlobInfo ToInfo(const detail::MappedShard& shard, const detail::BlobEntry& e) {
  const uint8_t* mapped = shard.mapped();
  return BlobInfo{
      mapped != nullptr ? mapped + e.offset : nullptr, e.offset, e.stored_size, e.raw_size, e.checksum, e.codec};
}

Status ChecksumMismatch(const char* what, uint64_t expected, uint64_t found) {
  return Corruption(std::string(what) + " checksum mismatch: expected " + Hex64(expected) + ", found " + Hex64(found));
}
}  // namespace

const std::string& SampleView::shard_file() const { return shard_->name(); }

Result<Shape> SampleView::shape(size_t field) const {
  const Manifest& m = dataset_->manifest_;
  if (field >= m.fields.size() || m.fields[field].kind != FieldKind::kNdarray) return WrongKind(m, field, "ndarray");
  const FieldSpec& f = m.fields[field];
  const int64_t* dims = shard_->column(field).dims;
  if (dims == nullptr) return f.shape;
  return Shape(dims + local_ * f.shape.size(), dims + (local_ + 1) * f.shape.size());
}

Result<uint64_t> SampleView::raw_size(size_t field) const {
  ASSIGN_OR_RETURN(const Shape s, shape(field));
  return ByteSize(s, dataset_->manifest_.fields[field].dtype);
}

Result<BlobInfo> SampleView::blob(size_t field) const {
  const Manifest& m = dataset_->manifest_;
  if (field >= m.fields.size() || m.fields[field].kind != FieldKind::kNdarray) return WrongKind(m, field, "ndarray");
  if (m.fields[field].chunked())
    return InvalidArgument("field '" + m.fields[field].name + "' is stored in chunks; use chunk() or DecodeRegion()");
  return ToInfo(*shard_, detail::ReadBlobRef(shard_->column(field).blobs, local_));
}

Result<uint64_t> SampleView::num_chunks(size_t field) const {
  const Manifest& m = dataset_->manifest_;
  if (field >= m.fields.size() || !m.fields[field].chunked()) return WrongKind(m, field, "chunked ndarray");
  const uint64_t* starts = shard_->column(field).chunk_starts;
  return starts[local_ + 1] - starts[local_];
}

Result<BlobInfo> SampleView::chunk(size_t field, uint64_t k) const {
  ASSIGN_OR_RETURN(const uint64_t n, num_chunks(field));
  if (k >= n)
    return OutOfRange(Where(field) + ": no chunk " + std::to_string(k) + " (" + std::to_string(n) + " chunks)");
  const detail::ColumnView& c = shard_->column(field);
  return ToInfo(*shard_, detail::ReadBlobRef(c.chunks, c.chunk_starts[local_] + k));
}

std::string SampleView::Where(size_t field) const {
  return shard_->path() + " sample " + std::to_string(index_) + " field '" + dataset_->manifest_.fields[field].name +
         "'";
}

Status SampleView::Fail(const Status& s, size_t field, const std::string& part) const {
  // A read the file could not serve (it shrank, or its mapping faulted): close the shard,
  // so the next access opens it anew and checks it against the manifest.
  if (s.code() == StatusCode::kIOError || shard_->faulted()) dataset_->Forget(shard_);
  // An I/O error names the file already.
  const std::string where = s.code() == StatusCode::kIOError ? "sample " + std::to_string(index_) + " field '" +
                                                                   dataset_->manifest_.fields[field].name + "'"
                                                             : Where(field);
  return s.WithContext(where + part);
}

Result<int64_t> SampleView::int_value(size_t field) const {
  const Manifest& m = dataset_->manifest_;
  if (field >= m.fields.size() || m.fields[field].kind != FieldKind::kInt) return WrongKind(m, field, "int");
  return shard_->column(field).ints[local_];
}

Result<double> SampleView::float_value(size_t field) const {
  const Manifest& m = dataset_->manifest_;
  if (field >= m.fields.size() || m.fields[field].kind != FieldKind::kFloat) return WrongKind(m, field, "float");
  return shard_->column(field).floats[local_];
}

Result<std::string_view> SampleView::bytes_value(size_t field) const {
  const Manifest& m = dataset_->manifest_;
  if (field >= m.fields.size() ||
      (m.fields[field].kind != FieldKind::kString && m.fields[field].kind != FieldKind::kBytes))
    return WrongKind(m, field, "string or bytes");
  const detail::ColumnView& c = shard_->column(field);
  const uint64_t begin = c.data_offsets[local_], end = c.data_offsets[local_ + 1];
  return std::string_view(reinterpret_cast<const char*>(c.data) + begin, end - begin);
}

Status SampleView::Decode(size_t field, void* dst, size_t dst_size, Decoder& decoder) const {
  const Manifest& m = dataset_->manifest_;
  if (field >= m.fields.size() || m.fields[field].kind != FieldKind::kNdarray) return WrongKind(m, field, "ndarray");
  if (m.fields[field].chunked()) {
    ASSIGN_OR_RETURN(const Shape s, shape(field));
    return DecodeRegion(field, Shape(s.size(), 0), s, dst, dst_size, decoder);
  }
  const BlobInfo b = ToInfo(*shard_, detail::ReadBlobRef(shard_->column(field).blobs, local_));
  if (dst_size < b.raw_size)
    return InvalidArgument(Where(field) + ": destination holds " + std::to_string(dst_size) + " bytes, needs " +
                           std::to_string(b.raw_size));
  const Status s = ReadStored(field, b, "blob", dst, decoder);
  return s.ok() ? s : Fail(s, field, "");
}

namespace {

// Samples a gather loop looks ahead: far enough for the misses of several samples to be in
// flight at once, near enough for the prefetched lines to stay in L1/L2.
constexpr size_t kPrefetchAhead = 8;
constexpr uint64_t kPrefetchBytes = 4096;  // per blob; longer blobs stream on their own

void PrefetchRange(const uint8_t* p, uint64_t bytes) {
  for (uint64_t o = 0; o < bytes; o += 64) __builtin_prefetch(p + o);
}

}  // namespace

Status SampleView::DecodeBatch(const SampleView* views, size_t n, size_t field, uint8_t* dst, size_t stride,
                               Decoder& decoder, size_t* failed) {
  *failed = 0;
  if (n == 0) return Status::Ok();
  const Manifest& m = views[0].dataset_->manifest_;
  if (field >= m.fields.size()) return InvalidArgument("no field number " + std::to_string(field));
  const FieldSpec& f = m.fields[field];
  if (f.kind == FieldKind::kInt || f.kind == FieldKind::kFloat) {
    if (stride < 8)
      return InvalidArgument("DecodeBatch: a stride of " + std::to_string(stride) + " bytes for 8-byte values");
    for (size_t i = 0; i < n; ++i) {
      if (i + kPrefetchAhead < n) {
        const SampleView& a = views[i + kPrefetchAhead];
        const detail::ColumnView& c = a.shard_->column(field);
        __builtin_prefetch(f.kind == FieldKind::kInt ? static_cast<const void*>(c.ints + a.local_)
                                                     : c.floats + a.local_);
      }
      const detail::ColumnView& c = views[i].shard_->column(field);
      const void* value =
          f.kind == FieldKind::kInt ? static_cast<const void*>(c.ints + views[i].local_) : c.floats + views[i].local_;
      std::memcpy(dst + i * stride, value, 8);
    }
    return Status::Ok();
  }
  if (f.kind != FieldKind::kNdarray || f.chunked() || f.variable_shape())
    return InvalidArgument("DecodeBatch: field '" + f.name +
                           "' is not an int, a float or an unchunked array of fixed shape");
  ASSIGN_OR_RETURN(const uint64_t bytes, ByteSize(f.shape, f.dtype));
  if (stride < bytes)
    return InvalidArgument("DecodeBatch: a stride of " + std::to_string(stride) + " bytes for arrays of " +
                           std::to_string(bytes));
  for (size_t i = 0; i < n; ++i) {
    if (i + 2 * kPrefetchAhead < n) {  // the index entry first, its blob on a later round
      const SampleView& a = views[i + 2 * kPrefetchAhead];
      __builtin_prefetch(detail::BlobRefAddress(a.shard_->column(field).blobs, a.local_));
    }
    if (i + kPrefetchAhead < n) {
      const SampleView& a = views[i + kPrefetchAhead];
      if (const uint8_t* mapped = a.shard_->mapped()) {
        const detail::BlobEntry e = detail::ReadBlobRef(a.shard_->column(field).blobs, a.local_);
        PrefetchRange(mapped + e.offset, std::min(e.stored_size, kPrefetchBytes));
      }
    }
    const SampleView& v = views[i];
    const BlobInfo b = ToInfo(*v.shard_, detail::ReadBlobRef(v.shard_->column(field).blobs, v.local_));
    const Status s = v.ReadStored(field, b, "blob", dst + i * stride, decoder);
    if (!s.ok()) {
      *failed = i;
      return v.Fail(s, field, "");
    }
  }
  return Status::Ok();
}

Status SampleView::ReadStored(size_t field, const BlobInfo& b, const char* what, void* dst, Decoder& decoder) const {
  const FieldSpec& f = dataset_->manifest_.fields[field];
  const bool verify = dataset_->options_.verify_checksums;
  if (detail::StoredInPlace(b.codec) && f.filter == Filter::kNone) {  // straight into dst, then checked there
    if (b.stored_size != b.raw_size)
      return Corruption("raw blob of " + std::to_string(b.stored_size) + " bytes, expected " +
                        std::to_string(b.raw_size));
    RETURN_IF_ERROR(shard_->Read(b.offset, b.stored_size, dst));
    const uint64_t sum = verify ? Checksum64(dst, b.stored_size) : b.checksum;
    return sum == b.checksum ? Status::Ok() : ChecksumMismatch(what, b.checksum, sum);
  }
  decoder.stored_.resize(b.stored_size);
  RETURN_IF_ERROR(shard_->Read(b.offset, b.stored_size, decoder.stored_.data()));
  const uint64_t sum = verify ? Checksum64(decoder.stored_.data(), b.stored_size) : b.checksum;
  if (sum != b.checksum) return ChecksumMismatch(what, b.checksum, sum);
  const detail::Dictionary* dict = dataset_->impl_->dicts[field].get();
  if (f.filter == Filter::kNone) {
    return detail::DecodeBlob(b.codec, decoder.stored_.data(), b.stored_size, b.raw_size, dst, decoder.codecs_.get(),
                              dict);
  }
  const size_t elem = DTypeSize(f.dtype);
  const bool table = f.filter == Filter::kDeltaColumns;  // the manifest checked: [rows, cols >= 1]
  const size_t unit = table ? elem * static_cast<size_t>(f.shape.back()) : elem;
  if (elem == 0 || b.raw_size % unit != 0)
    return Corruption("blob of " + std::to_string(b.raw_size) + " bytes is not a whole number of " +
                      std::to_string(unit) + (table ? "-byte rows" : "-byte elements"));
  const uint8_t* shuffled = decoder.stored_.data();
  if (!detail::StoredInPlace(b.codec)) {
    decoder.shuffled_.resize(b.raw_size);
    RETURN_IF_ERROR(detail::DecodeBlob(b.codec, decoder.stored_.data(), b.stored_size, b.raw_size,
                                       decoder.shuffled_.data(), decoder.codecs_.get(), dict));
    shuffled = decoder.shuffled_.data();
  } else if (b.stored_size != b.raw_size) {
    return Corruption("raw blob of " + std::to_string(b.stored_size) + " bytes, expected " +
                      std::to_string(b.raw_size));
  }
  if (table) {
    detail::UndoDeltaColumns(shuffled, static_cast<uint8_t*>(dst), b.raw_size / unit,
                             static_cast<size_t>(f.shape.back()), elem);
  } else {
    detail::ByteUnshuffle(shuffled, static_cast<uint8_t*>(dst), b.raw_size / elem, elem);
  }
  return Status::Ok();
}

}  // namespace shardify

namespace shardify {

Status SampleView::DecodeChunk(size_t field, uint64_t k, uint8_t* dst, Decoder& decoder) const {
  ASSIGN_OR_RETURN(const BlobInfo b, chunk(field, k));
  ++decoder.chunks_decoded_;
  const Status s = ReadStored(field, b, "chunk", dst, decoder);
  return s.ok() ? s : Fail(s, field, " chunk " + std::to_string(k));
}

namespace {

void FillPad(uint8_t* dst, uint64_t bytes, const void* pad, size_t elem) {
  if (bytes == 0) return;  // an empty array: dst may be null
  if (pad == nullptr) {
    std::memset(dst, 0, bytes);
    return;
  }
  for (uint64_t o = 0; o + elem <= bytes; o += elem) std::memcpy(dst + o, pad, elem);
}

}  // namespace

Status SampleView::DecodeRegion(size_t field, const Shape& start, const Shape& size, void* dst, size_t dst_size,
                                Decoder& decoder, const void* pad_element) const {
  ASSIGN_OR_RETURN(const Shape shape, this->shape(field));
  const FieldSpec& f = dataset_->manifest_.fields[field];
  const size_t rank = shape.size(), elem = DTypeSize(f.dtype);
  if (start.size() != rank || size.size() != rank)
    return InvalidArgument(Where(field) + ": region of rank " + std::to_string(size.size()) + " for an array of rank " +
                           std::to_string(rank));
  ASSIGN_OR_RETURN(const uint64_t bytes, ByteSize(size, f.dtype));
  if (dst_size < bytes)
    return InvalidArgument(Where(field) + ": destination holds " + std::to_string(dst_size) +
                           " bytes, the region needs " + std::to_string(bytes));
  auto* out = static_cast<uint8_t*>(dst);
  Shape lo(rank), hi(rank);  // the part of the region inside the array
  bool inside = true, empty = false;
  for (size_t i = 0; i < rank; ++i) {
    lo[i] = std::max<int64_t>(start[i], 0);
    hi[i] = std::min<int64_t>(start[i] + size[i], shape[i]);
    inside = inside && lo[i] == start[i] && hi[i] == start[i] + size[i];
    empty = empty || hi[i] <= lo[i];
  }
  if (!inside || empty) FillPad(out, bytes, pad_element, elem);
  if (empty || rank == 0) return rank == 0 ? Decode(field, dst, dst_size, decoder) : Status::Ok();
  Shape box(rank), at(rank);
  for (size_t i = 0; i < rank; ++i) box[i] = hi[i] - lo[i], at[i] = lo[i] - start[i];
  if (!f.chunked()) {
    ASSIGN_OR_RETURN(const uint64_t whole, ByteSize(shape, f.dtype));
    decoder.scratch_.resize(whole);
    RETURN_IF_ERROR(Decode(field, decoder.scratch_.data(), whole, decoder));
    CopyBox(decoder.scratch_.data(), shape, lo, out, size, at, box, elem);
    return Status::Ok();
  }
  ASSIGN_OR_RETURN(const ChunkGrid grid, MakeChunkGrid(shape, f.chunk_shape));
  Shape first(rank), last(rank), idx(rank), origin, extent;
  for (size_t i = 0; i < rank; ++i) {
    first[i] = lo[i] / grid.chunk[i];
    last[i] = (hi[i] - 1) / grid.chunk[i];
    idx[i] = first[i];
  }
  while (true) {
    uint64_t k = 0;
    for (size_t i = 0; i < rank; ++i) k = k * static_cast<uint64_t>(grid.grid[i]) + static_cast<uint64_t>(idx[i]);
    ChunkBox(grid, k, &origin, &extent);
    ASSIGN_OR_RETURN(const uint64_t chunk_bytes, ByteSize(extent, f.dtype));
    decoder.scratch_.resize(chunk_bytes);
    RETURN_IF_ERROR(DecodeChunk(field, k, decoder.scratch_.data(), decoder));
    Shape src_at(rank), dst_at(rank), part(rank);
    for (size_t i = 0; i < rank; ++i) {
      const int64_t a = std::max(lo[i], origin[i]), b = std::min(hi[i], origin[i] + extent[i]);
      src_at[i] = a - origin[i];
      dst_at[i] = a - start[i];
      part[i] = b - a;
    }
    CopyBox(decoder.scratch_.data(), extent, src_at, out, size, dst_at, part, elem);
    size_t i = rank;
    while (i-- > 0) {
      if (++idx[i] <= last[i]) break;
      idx[i] = first[i];
    }
    if (i == static_cast<size_t>(-1)) return Status::Ok();
  }
}

}  // namespace shardify
