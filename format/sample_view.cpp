// SampleView: a sample's fields read through its shard (sizes, blobs, chunks, scalars),
// decoded whole or by region, with every checksum checked.
#include <algorithm>
#include <cstring>

#include "base/checksum.h"
#include "format/chunk_grid.h"
#include "format/codec_internal.h"
#include "format/dataset.h"
#include "format/shard_file_internal.h"

namespace shardify {

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
  const detail::Dictionary* dict = dataset_->dictionary(field);
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

Result<const uint8_t*> SampleView::MappedChunk(size_t field, uint64_t k, uint64_t bytes, Decoder& decoder) const {
  const uint8_t* base = shard_->mapped();
  if (base == nullptr || shard_->ranged() || dataset_->manifest_.fields[field].filter != Filter::kNone) {
    return static_cast<const uint8_t*>(nullptr);
  }
  ASSIGN_OR_RETURN(const BlobInfo b, chunk(field, k));
  if (!detail::StoredInPlace(b.codec)) return static_cast<const uint8_t*>(nullptr);
  ++decoder.chunks_decoded_;
  const std::string part = " chunk " + std::to_string(k);
  if (b.stored_size != b.raw_size || b.raw_size != bytes) {
    return Fail(
        Corruption("raw chunk of " + std::to_string(b.stored_size) + " bytes, expected " + std::to_string(bytes)),
        field, part);
  }
  const uint8_t* at = base + b.offset;  // the range was checked against the file when the shard was opened
  if (dataset_->options_.verify_checksums) {
    const uint64_t sum = Checksum64(at, b.stored_size);
    if (shard_->faulted()) return Fail(shard_->FaultStatus(), field, part);
    if (sum != b.checksum) return Fail(ChecksumMismatch("chunk", b.checksum, sum), field, part);
  }
  return at;
}

namespace {

void FillPad(uint8_t* dst, uint64_t bytes, const void* pad, size_t elem) {
  if (bytes == 0) return;  // an empty array: dst may be null
  if (pad == nullptr) {
    std::memset(dst, 0, bytes);
    return;
  }
  if (elem == 0 || bytes < elem) return;
  std::memcpy(dst, pad, elem);
  uint64_t done = elem;  // doubling copies: a few large memcpy calls, not one per element
  const uint64_t whole = bytes - bytes % elem;
  while (done < whole) {
    const uint64_t n = std::min(done, whole - done);
    std::memcpy(dst + done, dst, n);
    done += n;
  }
}

}  // namespace

Status SampleView::DecodeRegion(size_t field, const Shape& start, const Shape& size, void* dst, size_t dst_size,
                                Decoder& decoder, const void* pad_element, ChunkCache* cache) const {
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
    ASSIGN_OR_RETURN(const uint8_t* src, MappedChunk(field, k, chunk_bytes, decoder));
    ChunkCache::Bytes kept;  // holds a cached chunk while it is copied
    if (src == nullptr && cache != nullptr) {
      kept = cache->Find(index_, static_cast<uint32_t>(field), k);
      if (!kept) {
        auto decoded = std::make_shared<std::vector<uint8_t>>(chunk_bytes);
        RETURN_IF_ERROR(DecodeChunk(field, k, decoded->data(), decoder));
        kept = std::move(decoded);
        cache->Insert(index_, static_cast<uint32_t>(field), k, kept);
      }
      if (kept->size() != chunk_bytes) return Fail(Internal("a cached chunk of another size"), field, "");
      src = kept->data();
    }
    if (src == nullptr) {
      decoder.scratch_.resize(chunk_bytes);
      RETURN_IF_ERROR(DecodeChunk(field, k, decoder.scratch_.data(), decoder));
      src = decoder.scratch_.data();
    }
    Shape src_at(rank), dst_at(rank), part(rank);
    for (size_t i = 0; i < rank; ++i) {
      const int64_t a = std::max(lo[i], origin[i]), b = std::min(hi[i], origin[i] + extent[i]);
      src_at[i] = a - origin[i];
      dst_at[i] = a - start[i];
      part[i] = b - a;
    }
    CopyBox(src, extent, src_at, out, size, dst_at, part, elem);
    if (shard_->faulted()) return Fail(shard_->FaultStatus(), field, " chunk " + std::to_string(k));
    size_t i = rank;
    while (i-- > 0) {
      if (++idx[i] <= last[i]) break;
      idx[i] = first[i];
    }
    if (i == static_cast<size_t>(-1)) return Status::Ok();
  }
}

}  // namespace shardify
