#include "format/dataset.h"

#include <zstd.h>

#include <algorithm>
#include <cstdio>
#include <list>
#include <mutex>

#include "format/checksum.h"
#include "format/codec_internal.h"
#include "format/file.h"
#include "format/shard_index_internal.h"

namespace shardify {

Decoder::Decoder() : dctx_(ZSTD_createDCtx()) {}
Decoder::~Decoder() { ZSTD_freeDCtx(static_cast<ZSTD_DCtx*>(dctx_)); }

namespace detail {

// One mapped and fully checked shard.
class MappedShard {
 public:
  static Result<std::shared_ptr<const MappedShard>> Open(const std::string& dir, const Manifest& m, size_t n,
                                                          const ReadOptions& options) {
    const ShardInfo& info = m.shards[n];
    const std::string path = JoinPath(dir, info.file_name);
    auto file = MappedFile::Open(path);
    if (!file.ok()) {
      if (file.status().code() == StatusCode::kNotFound) return Corruption(path + ": shard is missing");
      return file.status();
    }
    std::shared_ptr<MappedShard> shard(new MappedShard(std::move(file).value(), info.file_name));
    RETURN_IF_ERROR(shard->Check(m, info, options));
    return std::shared_ptr<const MappedShard>(std::move(shard));
  }

  const std::string& path() const { return file_->path(); }
  const std::string& name() const { return name_; }
  const uint8_t* data() const { return file_->data(); }
  const ColumnView& column(size_t f) const { return columns_[f]; }

 private:
  MappedShard(std::unique_ptr<MappedFile> file, std::string name) : file_(std::move(file)), name_(std::move(name)) {}

  Status Check(const Manifest& m, const ShardInfo& info, const ReadOptions& options) {
    const std::string& p = path();
    const uint64_t size = file_->size();
    if (size != info.size_bytes)
      return Corruption(p + ": shard is " + std::to_string(size) + " bytes, manifest says " + std::to_string(info.size_bytes));
    RETURN_IF_ERROR(CheckShardEnds(data(), data() + size - kShardFooterSize, size, p));
    const ShardFooter footer = DecodeShardFooter(data() + size - kShardFooterSize);
    if (footer.index_checksum != info.index_checksum)
      return Corruption(p + ": index checksum in footer disagrees with the manifest");
    const uint8_t* index = data() + footer.index_offset;
    if (Checksum64(index, footer.index_length) != footer.index_checksum)
      return Corruption(p + ": index checksum mismatch");
    return CheckShardIndex(index, footer.index_length, m.fields, info.first_sample, info.num_samples,
                           footer.index_offset, options.max_sample_bytes, p, &columns_);
  }

  std::unique_ptr<MappedFile> file_;
  std::string name_;
  std::vector<ColumnView> columns_;
};

}  // namespace detail

struct Dataset::Impl {
  std::vector<uint64_t> shard_starts;  // first sample of each shard
  std::vector<std::shared_ptr<const detail::ZstdDictionary>> dicts;
  mutable std::mutex mu;
  mutable std::vector<std::shared_ptr<const detail::MappedShard>> open;  // by shard number
  mutable std::list<size_t> lru;                                          // front = most recent
  mutable std::vector<std::list<size_t>::iterator> lru_pos;
};

Dataset::Dataset(std::string dir, Manifest manifest, ReadOptions options)
    : dir_(std::move(dir)), manifest_(std::move(manifest)), options_(options), impl_(std::make_unique<Impl>()) {}

Dataset::~Dataset() = default;

Result<std::unique_ptr<Dataset>> Dataset::Open(const std::string& dir, const ReadOptions& options) {
  if (options.max_open_shards == 0) return InvalidArgument("max_open_shards must be at least 1");
  const std::string path = JoinPath(dir, kManifestFileName);
  if (!IsDirectory(dir)) return NotFound(dir + ": no such directory");
  if (!PathExists(path)) return NotFound(dir + ": not a shardify dataset (no " + kManifestFileName + ")");
  ASSIGN_OR_RETURN(auto file, MappedFile::Open(path));
  ASSIGN_OR_RETURN(Manifest m, DecodeManifestFile(file->data(), file->size(), path));
  std::unique_ptr<Dataset> ds(new Dataset(dir, std::move(m), options));
  Impl& impl = *ds->impl_;
  for (const auto& s : ds->manifest_.shards) impl.shard_starts.push_back(s.first_sample);
  impl.open.resize(ds->manifest_.shards.size());
  impl.lru_pos.resize(ds->manifest_.shards.size());
  for (const auto& f : ds->manifest_.fields) {
    std::shared_ptr<const detail::ZstdDictionary> d;
    if (!f.zstd_dictionary.empty()) {
      auto made = detail::ZstdDictionary::Create(f.zstd_dictionary, 1);
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
  const auto& starts = impl_->shard_starts;
  const size_t n = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), index) - starts.begin()) - 1;
  SampleView v;
  v.dataset_ = this;
  v.index_ = index;
  v.local_ = index - starts[n];
  std::unique_lock<std::mutex> lock(impl_->mu);
  if (impl_->open[n]) {
    impl_->lru.splice(impl_->lru.begin(), impl_->lru, impl_->lru_pos[n]);
    v.shard_ = impl_->open[n];
    return v;
  }
  lock.unlock();  // map and check without holding the lock
  ASSIGN_OR_RETURN(auto shard, detail::MappedShard::Open(dir_, manifest_, n, options_));
  lock.lock();
  if (!impl_->open[n]) {
    impl_->open[n] = shard;
    impl_->lru.push_front(n);
    impl_->lru_pos[n] = impl_->lru.begin();
    while (impl_->lru.size() > options_.max_open_shards) {
      impl_->open[impl_->lru.back()].reset();  // unmapped once no SampleView holds it
      impl_->lru.pop_back();
    }
  }
  v.shard_ = impl_->open[n] ? impl_->open[n] : shard;
  return v;
}

Status Dataset::CheckShard(size_t n) const {
  if (n >= manifest_.shards.size()) return OutOfRange("no shard " + std::to_string(n));
  return detail::MappedShard::Open(dir_, manifest_, n, options_).status();
}

size_t Dataset::open_shards() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->lru.size();
}

// ---- SampleView ----

namespace {
std::string Hex64(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

Status WrongKind(const Manifest& m, size_t field, const char* wanted) {
  if (field >= m.fields.size()) return InvalidArgument("no field number " + std::to_string(field));
  return InvalidArgument("field '" + m.fields[field].name + "' is " + FieldKindName(m.fields[field].kind) + ", not " + wanted);
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

Result<BlobInfo> SampleView::blob(size_t field) const {
  const Manifest& m = dataset_->manifest_;
  if (field >= m.fields.size() || m.fields[field].kind != FieldKind::kNdarray) return WrongKind(m, field, "ndarray");
  const detail::BlobEntry e = detail::ReadBlobRef(shard_->column(field).blobs, local_);
  return BlobInfo{shard_->data() + e.offset, e.stored_size, e.raw_size, e.checksum, e.codec};
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
  ASSIGN_OR_RETURN(const BlobInfo b, blob(field));
  const std::string& name = dataset_->manifest_.fields[field].name;
  auto where = [&] { return shard_->path() + " sample " + std::to_string(index_) + " field '" + name + "'"; };
  if (dst_size < b.raw_size)
    return InvalidArgument(where() + ": destination holds " + std::to_string(dst_size) + " bytes, needs " +
                           std::to_string(b.raw_size));
  if (dataset_->options_.verify_checksums) {
    const uint64_t sum = Checksum64(b.data, b.stored_size);
    if (sum != b.checksum)
      return Corruption(where() + ": blob checksum mismatch: expected " + Hex64(b.checksum) + ", found " + Hex64(sum));
  }
  return detail::DecodeBlob(b.codec, b.data, b.stored_size, b.raw_size, dst, decoder.zstd_context(),
                            dataset_->impl_->dicts[field].get(), where());
}

}  // namespace shardify
