#include "format/dataset.h"

#include <zstd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <list>
#include <mutex>

#include "format/checksum.h"
#include "format/chunks_internal.h"
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
    if (size < kShardHeaderSize + kShardFooterSize)  // before any pointer arithmetic on the mapping
      return Corruption(p + ": " + std::to_string(size) + " bytes is too small for a shard");
    RETURN_IF_ERROR(CheckShardEnds(data(), data() + size - kShardFooterSize, size, p));
    const ShardFooter footer = DecodeShardFooter(data() + size - kShardFooterSize);
    if (footer.version != m.format_version)
      return Corruption(p + ": shard is version " + std::to_string(footer.version) + ", the manifest version " +
                        std::to_string(m.format_version));
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

Status Dataset::CheckSampleCounts(uint64_t first, uint64_t count) const {
  const uint64_t per_sample = std::max<uint64_t>(1, kMinIndexBytesPerField * manifest_.fields.size());
  for (const ShardInfo& s : manifest_.shards) {
    if (s.num_samples == 0 || s.first_sample >= first + count || s.first_sample + s.num_samples <= first) continue;
    const std::string path = JoinPath(dir_, s.file_name);
    Result<uint64_t> size = FileSize(path);
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

size_t Dataset::open_shards() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->lru.size();
}

// ---- SampleView ----

namespace {
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

Result<uint64_t> SampleView::raw_size(size_t field) const {
  ASSIGN_OR_RETURN(const Shape s, shape(field));
  return ByteSize(s, dataset_->manifest_.fields[field].dtype);
}

Result<BlobInfo> SampleView::blob(size_t field) const {
  const Manifest& m = dataset_->manifest_;
  if (field >= m.fields.size() || m.fields[field].kind != FieldKind::kNdarray) return WrongKind(m, field, "ndarray");
  if (m.fields[field].chunked())
    return InvalidArgument("field '" + m.fields[field].name + "' is stored in chunks; use chunk() or DecodeRegion()");
  const detail::BlobEntry e = detail::ReadBlobRef(shard_->column(field).blobs, local_);
  return BlobInfo{shard_->data() + e.offset, e.stored_size, e.raw_size, e.checksum, e.codec};
}

Result<uint64_t> SampleView::num_chunks(size_t field) const {
  const Manifest& m = dataset_->manifest_;
  if (field >= m.fields.size() || !m.fields[field].chunked()) return WrongKind(m, field, "chunked ndarray");
  const uint64_t* starts = shard_->column(field).chunk_starts;
  return starts[local_ + 1] - starts[local_];
}

Result<BlobInfo> SampleView::chunk(size_t field, uint64_t k) const {
  ASSIGN_OR_RETURN(const uint64_t n, num_chunks(field));
  if (k >= n) return OutOfRange(Where(field) + ": no chunk " + std::to_string(k) + " (" + std::to_string(n) + " chunks)");
  const detail::ColumnView& c = shard_->column(field);
  const detail::BlobEntry e = detail::ReadBlobRef(c.chunks, c.chunk_starts[local_] + k);
  return BlobInfo{shard_->data() + e.offset, e.stored_size, e.raw_size, e.checksum, e.codec};
}

std::string SampleView::Where(size_t field) const {
  return shard_->path() + " sample " + std::to_string(index_) + " field '" + dataset_->manifest_.fields[field].name + "'";
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
  if (field < m.fields.size() && m.fields[field].chunked()) {
    ASSIGN_OR_RETURN(const Shape s, shape(field));
    return DecodeRegion(field, Shape(s.size(), 0), s, dst, dst_size, decoder);
  }
  ASSIGN_OR_RETURN(const BlobInfo b, blob(field));
  if (dst_size < b.raw_size)
    return InvalidArgument(Where(field) + ": destination holds " + std::to_string(dst_size) + " bytes, needs " +
                           std::to_string(b.raw_size));
  if (dataset_->options_.verify_checksums) {
    const uint64_t sum = Checksum64(b.data, b.stored_size);
    if (sum != b.checksum)
      return Corruption(Where(field) + ": blob checksum mismatch: expected " + Hex64(b.checksum) + ", found " + Hex64(sum));
  }
  const Status s = DecodeStored(field, b, dst, decoder);
  return s.ok() ? s : s.WithContext(Where(field));
}

Status SampleView::DecodeStored(size_t field, const BlobInfo& b, void* dst, Decoder& decoder) const {
  const FieldSpec& f = dataset_->manifest_.fields[field];
  const detail::ZstdDictionary* dict = dataset_->impl_->dicts[field].get();
  if (f.filter == Filter::kNone) {
    return detail::DecodeBlob(b.codec, b.data, b.stored_size, b.raw_size, dst, decoder.zstd_context(), dict);
  }
  const size_t elem = DTypeSize(f.dtype);
  const bool table = f.filter == Filter::kDeltaColumns;  // the manifest checked: [rows, cols >= 1]
  const size_t unit = table ? elem * static_cast<size_t>(f.shape.back()) : elem;
  if (elem == 0 || b.raw_size % unit != 0)
    return Corruption("blob of " + std::to_string(b.raw_size) + " bytes is not a whole number of " +
                      std::to_string(unit) + (table ? "-byte rows" : "-byte elements"));
  decoder.shuffled_.resize(b.raw_size);
  RETURN_IF_ERROR(detail::DecodeBlob(b.codec, b.data, b.stored_size, b.raw_size, decoder.shuffled_.data(),
                                     decoder.zstd_context(), dict));
  if (table) {
    detail::UndoDeltaColumns(decoder.shuffled_.data(), static_cast<uint8_t*>(dst), b.raw_size / unit,
                             static_cast<size_t>(f.shape.back()), elem);
  } else {
    detail::ByteUnshuffle(decoder.shuffled_.data(), static_cast<uint8_t*>(dst), b.raw_size / elem, elem);
  }
  return Status::Ok();
}

}  // namespace shardify

namespace shardify {

Status SampleView::DecodeChunk(size_t field, uint64_t k, uint8_t* dst, Decoder& decoder) const {
  ASSIGN_OR_RETURN(const BlobInfo b, chunk(field, k));
  auto where = [&] { return Where(field) + " chunk " + std::to_string(k); };
  if (dataset_->options_.verify_checksums) {
    const uint64_t sum = Checksum64(b.data, b.stored_size);
    if (sum != b.checksum)
      return Corruption(where() + ": chunk checksum mismatch: expected " + Hex64(b.checksum) + ", found " + Hex64(sum));
  }
  ++decoder.chunks_decoded_;
  const Status s = DecodeStored(field, b, dst, decoder);
  return s.ok() ? s : s.WithContext(where());
}

namespace {

void FillPad(uint8_t* dst, uint64_t bytes, const void* pad, size_t elem) {
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
    return InvalidArgument(Where(field) + ": destination holds " + std::to_string(dst_size) + " bytes, the region needs " +
                           std::to_string(bytes));
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
    detail::CopyBox(decoder.scratch_.data(), shape, lo, out, size, at, box, elem);
    return Status::Ok();
  }
  ASSIGN_OR_RETURN(const detail::ChunkGrid grid, detail::MakeChunkGrid(shape, f.chunk_shape));
  Shape first(rank), last(rank), idx(rank), origin, extent;
  for (size_t i = 0; i < rank; ++i) {
    first[i] = lo[i] / grid.chunk[i];
    last[i] = (hi[i] - 1) / grid.chunk[i];
    idx[i] = first[i];
  }
  while (true) {
    uint64_t k = 0;
    for (size_t i = 0; i < rank; ++i) k = k * static_cast<uint64_t>(grid.grid[i]) + static_cast<uint64_t>(idx[i]);
    detail::ChunkBox(grid, k, &origin, &extent);
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
    detail::CopyBox(decoder.scratch_.data(), extent, src_at, out, size, dst_at, part, elem);
    size_t i = rank;
    while (i-- > 0) {
      if (++idx[i] <= last[i]) break;
      idx[i] = first[i];
    }
    if (i == static_cast<size_t>(-1)) return Status::Ok();
  }
}

}  // namespace shardify
