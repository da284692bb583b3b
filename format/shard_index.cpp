#include "format/chunk_grid.h"
#include "format/codec_internal.h"
#include "format/shard_index_internal.h"
#include "schemas/shard_index_generated.h"

namespace shardify::detail {

ShardIndexBuilder::ShardIndexBuilder(const std::vector<FieldSpec>* fields)
    : fields_(fields), columns_(fields->size()) {}

void ShardIndexBuilder::Reset(uint64_t first_sample) {
  columns_.assign(fields_->size(), Column{});
  first_sample_ = first_sample;
  num_samples_ = 0;
}

void ShardIndexBuilder::AddBlob(size_t field, const BlobEntry& blob, const Shape& shape) {
  Column& c = columns_[field];
  c.blobs.push_back(blob);
  if ((*fields_)[field].variable_shape()) c.dims.insert(c.dims.end(), shape.begin(), shape.end());
}

void ShardIndexBuilder::AddChunks(size_t field, const std::vector<BlobEntry>& chunks, const Shape& shape) {
  Column& c = columns_[field];
  if (c.chunk_starts.empty()) c.chunk_starts.push_back(0);
  c.chunks.insert(c.chunks.end(), chunks.begin(), chunks.end());
  c.chunk_starts.push_back(c.chunks.size());
  if ((*fields_)[field].variable_shape()) c.dims.insert(c.dims.end(), shape.begin(), shape.end());
}

void ShardIndexBuilder::AddInt(size_t field, int64_t v) { columns_[field].ints.push_back(v); }
void ShardIndexBuilder::AddFloat(size_t field, double v) { columns_[field].floats.push_back(v); }

void ShardIndexBuilder::AddData(size_t field, const std::string& payload) {
  Column& c = columns_[field];
  if (c.data_offsets.empty()) c.data_offsets.push_back(0);
  c.data.insert(c.data.end(), payload.begin(), payload.end());
  c.data_offsets.push_back(c.data.size());
}

namespace {
std::vector<fb::BlobRef> ToRefs(const std::vector<BlobEntry>& entries) {
  std::vector<fb::BlobRef> refs;
  refs.reserve(entries.size());
  for (const BlobEntry& e : entries)
    refs.emplace_back(e.offset, e.stored_size, e.raw_size, e.checksum, static_cast<uint8_t>(e.codec));
  return refs;
}
}  // namespace

std::vector<uint8_t> ShardIndexBuilder::Finish() const {
  flatbuffers::FlatBufferBuilder b(1 << 16);
  std::vector<flatbuffers::Offset<fb::Column>> cols;
  for (size_t f = 0; f < columns_.size(); ++f) {
    const Column& c = columns_[f];
    flatbuffers::Offset<flatbuffers::Vector<const fb::BlobRef*>> blobs, chunks;
    flatbuffers::Offset<flatbuffers::Vector<uint64_t>> chunk_starts;
    flatbuffers::Offset<flatbuffers::Vector<int64_t>> dims, ints;
    flatbuffers::Offset<flatbuffers::Vector<double>> floats;
    flatbuffers::Offset<flatbuffers::Vector<uint8_t>> data;
    flatbuffers::Offset<flatbuffers::Vector<uint64_t>> offsets;
    switch ((*fields_)[f].kind) {
      case FieldKind::kNdarray: {
        if ((*fields_)[f].chunked()) {
          chunks = b.CreateVectorOfStructs(ToRefs(c.chunks));
          chunk_starts = b.CreateVector(c.chunk_starts.empty() ? std::vector<uint64_t>{0} : c.chunk_starts);
        } else {
          blobs = b.CreateVectorOfStructs(ToRefs(c.blobs));
        }
        if ((*fields_)[f].variable_shape()) dims = b.CreateVector(c.dims);
        break;
      }
      case FieldKind::kInt:
        ints = b.CreateVector(c.ints);
        break;
      case FieldKind::kFloat:
        floats = b.CreateVector(c.floats);
        break;
      case FieldKind::kString:
      case FieldKind::kBytes: {
        data = b.CreateVector(c.data);
        std::vector<uint64_t> offs = c.data_offsets.empty() ? std::vector<uint64_t>{0} : c.data_offsets;
        offsets = b.CreateVector(offs);
        break;
      }
    }
    cols.push_back(fb::CreateColumn(b, blobs, dims, ints, floats, data, offsets, chunks, chunk_starts));
  }
  auto root = fb::CreateShardIndex(b, first_sample_, num_samples_, b.CreateVector(cols));
  fb::FinishShardIndexBuffer(b, root);
  return std::vector<uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
}

namespace {

// `what` (e.g. "x.sfs: index") is a ShardIndex FlatBuffer, read only inside [index, +length).
Status VerifyIndexBuffer(const uint8_t* index, uint64_t length, const std::string& what) {
  // The root offset and the file identifier come first; the identifier check reads them.
  if (index == nullptr || length < sizeof(flatbuffers::uoffset_t) + flatbuffers::kFileIdentifierLength)
    return Corruption(what + " of " + std::to_string(length) + " bytes is too short for a FlatBuffer");
  flatbuffers::Verifier verifier(index, length, /*max_depth=*/16, /*max_tables=*/1u << 20);
  if (!fb::ShardIndexBufferHasIdentifier(index) || !fb::VerifyShardIndexBuffer(verifier))
    return Corruption(what + " fails the FlatBuffers verifier");
  return Status::Ok();
}

}  // namespace

Status SetIndexFirstSample(std::vector<uint8_t>* index, uint64_t first_sample, const std::string& where) {
  RETURN_IF_ERROR(VerifyIndexBuffer(index->data(), index->size(), where + ": shard index"));
  auto* table = flatbuffers::GetMutableRoot<flatbuffers::Table>(index->data());
  if (!table->SetField<uint64_t>(fb::ShardIndex::VT_FIRST_SAMPLE, first_sample, 0))
    return Internal(where + ": the shard index stores no first_sample to set to " + std::to_string(first_sample));
  return Status::Ok();
}

// ReadBlobRef (shard_index_internal.h) reads BlobRefs without the generated code.
static_assert(sizeof(fb::BlobRef) == kBlobRefBytes, "BlobRef layout");
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "BlobRefs are read as little-endian");

namespace {

template <typename V>
uint64_t Len(const V* v) {
  return v ? v->size() : 0;
}

// A sample's field (or one of its chunks) as messages name it: "PATH sample I field 'F'
// [chunk K]". The index is checked sample by sample, so the text is made only for an error.
struct SampleLocation {
  static constexpr uint64_t kWhole = UINT64_MAX;
  const std::string& path;
  uint64_t sample;
  const std::string& field;
  uint64_t chunk = kWhole;
  std::string str() const {
    return path + " sample " + std::to_string(sample) + " field '" + field + "'" +
           (chunk == kWhole ? std::string() : " chunk " + std::to_string(chunk));
  }
};

// Where the blob lies and how it is coded: inside the data region, aligned when raw.
Status CheckPlacement(const FieldSpec& f, const fb::BlobRef& ref, uint64_t blob_end, const SampleLocation& where) {
  const uint64_t off = ref.offset(), stored = ref.stored_size();
  const detail::CodecSpec* codec = detail::FindCodec(ref.codec());
  const bool in_place = codec != nullptr && codec->in_place;
  if (off < kShardHeaderSize || (in_place && off % kBlobAlignment != 0) || off > blob_end || stored > blob_end - off)
    return Corruption(where.str() + ": blob [" + std::to_string(off) + ", +" + std::to_string(stored) +
                      ") lies outside the data region [16, " + std::to_string(blob_end) + ") or is misaligned");
  if (codec == nullptr) return Corruption(where.str() + ": unknown codec " + std::to_string(ref.codec()));
  if (codec->uses_dictionary && f.dictionary.empty())
    return Corruption(where.str() + ": blob uses a dictionary but the field has none");
  return Status::Ok();
}

// The blob decodes to exactly the bytes of `shape`, within the reader's limit.
Status CheckRawSize(const FieldSpec& f, const fb::BlobRef& ref, const Shape& shape, uint64_t max_bytes,
                    const SampleLocation& where) {
  auto bytes = ByteSize(shape, f.dtype);
  if (!bytes.ok()) return Corruption(where.str() + ": " + bytes.status().message());
  if (*bytes != ref.raw_size())
    return Corruption(where.str() + ": raw size " + std::to_string(ref.raw_size()) + " disagrees with shape " +
                      ShapeToString(shape) + " (" + std::to_string(*bytes) + " bytes)");
  if (*bytes > max_bytes)
    return Corruption(where.str() + ": raw size " + std::to_string(*bytes) + " exceeds the limit of " +
                      std::to_string(max_bytes));
  if (detail::StoredInPlace(static_cast<Codec>(ref.codec())) && ref.stored_size() != *bytes)
    return Corruption(where.str() + ": raw blob stores " + std::to_string(ref.stored_size()) + " bytes, expected " +
                      std::to_string(*bytes));
  return Status::Ok();
}

Status CheckOffsets(const uint64_t* offs, uint64_t n, uint64_t end, const std::string& where, const char* what) {
  uint64_t prev = 0;
  for (uint64_t i = 0; i <= n; ++i) {
    if (offs[i] < prev || (i == 0 && offs[0] != 0))
      return Corruption(where + ": " + what + " are not ascending from 0 at entry " + std::to_string(i));
    prev = offs[i];
  }
  if (prev != end)
    return Corruption(where + ": " + what + " end at " + std::to_string(prev) + ", expected " + std::to_string(end));
  return Status::Ok();
}

Result<Shape> SampleShape(const FieldSpec& f, const int64_t* dims, const SampleLocation& where) {
  Shape shape = f.shape;
  if (dims != nullptr) shape.assign(dims, dims + f.shape.size());
  if (!ShapeMatches(f.shape, shape))
    return Corruption(where.str() + ": shape " + ShapeToString(shape) + " does not fit the field's " +
                      ShapeToString(f.shape));
  return shape;
}

// A chunked sample: as many chunks as its grid has, each sized as its clipped box.
Status CheckChunks(const FieldSpec& f, const fb::Column& c, uint64_t i, const Shape& shape, uint64_t blob_end,
                   uint64_t max_bytes, const SampleLocation& where) {
  auto grid = MakeChunkGrid(shape, f.chunk_shape);
  if (!grid.ok()) return Corruption(where.str() + ": " + grid.status().message());
  const uint64_t begin = c.chunk_starts()->Get(static_cast<flatbuffers::uoffset_t>(i));
  const uint64_t end = c.chunk_starts()->Get(static_cast<flatbuffers::uoffset_t>(i + 1));
  if (end - begin != grid->count)
    return Corruption(where.str() + ": " + std::to_string(end - begin) + " chunks, the grid of " +
                      ShapeToString(shape) + " by " + ShapeToString(f.chunk_shape) + " has " +
                      std::to_string(grid->count));
  Shape origin, extent;
  for (uint64_t k = 0; k < grid->count; ++k) {
    const fb::BlobRef& ref = *c.chunks()->Get(static_cast<flatbuffers::uoffset_t>(begin + k));
    const SampleLocation at{where.path, where.sample, where.field, k};
    ChunkBox(*grid, k, &origin, &extent);
    RETURN_IF_ERROR(CheckPlacement(f, ref, blob_end, at));
    RETURN_IF_ERROR(CheckRawSize(f, ref, extent, max_bytes, at));
  }
  auto total = ByteSize(shape, f.dtype);
  if (!total.ok() || *total > max_bytes)
    return Corruption(where.str() + ": shape " + ShapeToString(shape) + " exceeds the limit of " +
                      std::to_string(max_bytes));
  return Status::Ok();
}

Status CheckNdarray(const FieldSpec& f, const fb::Column& c, uint64_t first, uint64_t n, uint64_t blob_end,
                    uint64_t max_bytes, const std::string& path, ColumnView* view) {
  const std::string where = path + " field '" + f.name + "'";
  const uint64_t rank = f.shape.size();
  const bool variable = f.variable_shape();
  if (Len(c.dims()) != (variable ? n * rank : 0))
    return Corruption(where + ": " + std::to_string(Len(c.dims())) + " shape entries, expected " +
                      std::to_string(variable ? n * rank : 0));
  view->dims = variable && n && rank ? c.dims()->data() : nullptr;
  if (f.chunked()) {
    if (Len(c.chunk_starts()) != n + 1)
      return Corruption(where + ": " + std::to_string(Len(c.chunk_starts())) + " chunk starts for " +
                        std::to_string(n) + " samples");
    RETURN_IF_ERROR(CheckOffsets(c.chunk_starts()->data(), n, Len(c.chunks()), where, "chunk starts"));
    view->chunks = Len(c.chunks()) ? c.chunks()->Get(0) : nullptr;
    view->chunk_starts = c.chunk_starts()->data();
  } else {
    if (Len(c.blobs()) != n)
      return Corruption(where + ": " + std::to_string(Len(c.blobs())) + " blobs for " + std::to_string(n) + " samples");
    view->blobs = n ? c.blobs()->Get(0) : nullptr;
  }
  for (uint64_t i = 0; i < n; ++i) {
    const SampleLocation at{path, first + i, f.name};
    ASSIGN_OR_RETURN(const Shape shape, SampleShape(f, view->dims ? view->dims + i * rank : nullptr, at));
    if (f.chunked()) {
      RETURN_IF_ERROR(CheckChunks(f, c, i, shape, blob_end, max_bytes, at));
      continue;
    }
    const fb::BlobRef& ref = *c.blobs()->Get(static_cast<flatbuffers::uoffset_t>(i));
    RETURN_IF_ERROR(CheckPlacement(f, ref, blob_end, at));
    RETURN_IF_ERROR(CheckRawSize(f, ref, shape, max_bytes, at));
  }
  return Status::Ok();
}

Status CheckData(const fb::Column& c, uint64_t n, const std::string& where, ColumnView* view) {
  if (Len(c.data_offsets()) != n + 1)
    return Corruption(where + ": " + std::to_string(Len(c.data_offsets())) + " data offsets, expected " +
                      std::to_string(n + 1));
  RETURN_IF_ERROR(CheckOffsets(c.data_offsets()->data(), n, Len(c.data()), where, "data offsets"));
  view->data = c.data() ? c.data()->data() : nullptr;
  view->data_offsets = c.data_offsets()->data();
  return Status::Ok();
}

Status CheckColumn(const FieldSpec& f, const fb::Column& c, uint64_t first, uint64_t n, uint64_t blob_end,
                   uint64_t max_bytes, const std::string& path, ColumnView* view) {
  const std::string where = path + " field '" + f.name + "'";
  const bool nd = f.kind == FieldKind::kNdarray, in = f.kind == FieldKind::kInt, fl = f.kind == FieldKind::kFloat;
  const bool da = f.kind == FieldKind::kString || f.kind == FieldKind::kBytes;
  const bool chunked = nd && f.chunked();
  if ((!nd && (Len(c.blobs()) || Len(c.dims()))) || (!in && Len(c.ints())) || (!fl && Len(c.floats())) ||
      (!da && (Len(c.data()) || Len(c.data_offsets()))) || (chunked && Len(c.blobs())) ||
      (!chunked && (Len(c.chunks()) || Len(c.chunk_starts()))))
    return Corruption(where + ": holds vectors of another field kind than " + FieldKindName(f.kind));
  if (nd) return CheckNdarray(f, c, first, n, blob_end, max_bytes, path, view);
  if (da) return CheckData(c, n, where, view);
  const uint64_t len = in ? Len(c.ints()) : Len(c.floats());
  if (len != n) return Corruption(where + ": " + std::to_string(len) + " values for " + std::to_string(n) + " samples");
  if (in) view->ints = n ? c.ints()->data() : nullptr;
  if (fl) view->floats = n ? c.floats()->data() : nullptr;
  return Status::Ok();
}

}  // namespace

Status CheckShardIndex(const uint8_t* index, uint64_t length, const std::vector<FieldSpec>& fields,
                       uint64_t first_sample, uint64_t num_samples, uint64_t blob_end, uint64_t max_sample_bytes,
                       const std::string& where, std::vector<ColumnView>* columns) {
  RETURN_IF_ERROR(VerifyIndexBuffer(index, length, where + ": index"));
  const fb::ShardIndex* root = fb::GetShardIndex(index);
  if (root->first_sample() != first_sample || root->num_samples() != num_samples)
    return Corruption(where + ": index holds samples [" + std::to_string(root->first_sample()) + ", +" +
                      std::to_string(root->num_samples()) + "), manifest says [" + std::to_string(first_sample) +
                      ", +" + std::to_string(num_samples) + ")");
  if (Len(root->columns()) != fields.size())
    return Corruption(where + ": index has " + std::to_string(Len(root->columns())) + " columns for " +
                      std::to_string(fields.size()) + " fields");
  columns->assign(fields.size(), ColumnView{});
  for (size_t f = 0; f < fields.size(); ++f) {
    RETURN_IF_ERROR(CheckColumn(fields[f], *root->columns()->Get(static_cast<flatbuffers::uoffset_t>(f)), first_sample,
                                num_samples, blob_end, max_sample_bytes, where, &(*columns)[f]));
  }
  return Status::Ok();
}

}  // namespace shardify::detail
