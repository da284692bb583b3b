#include <zdict.h>
#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_c_literalCompressionMode, ZSTD_ps_disable (libzstd >= 1.5.1)
#include <zstd.h>

#include <cstring>

#include "format/codec_internal.h"

namespace shardify::detail {

CodecContext::~CodecContext() {
  ZSTD_freeCCtx(static_cast<ZSTD_CCtx*>(cctx_));
  ZSTD_freeDCtx(static_cast<ZSTD_DCtx*>(dctx_));
}

Result<void*> CodecContext::zstd_compression() {
  if (cctx_ == nullptr) cctx_ = ZSTD_createCCtx();
  if (cctx_ == nullptr) return ResourceExhausted("cannot create a zstd compression context");
  return cctx_;
}

Result<void*> CodecContext::zstd_decompression() {
  if (dctx_ == nullptr) dctx_ = ZSTD_createDCtx();
  if (dctx_ == nullptr) return ResourceExhausted("cannot create a zstd decompression context");
  return dctx_;
}

Result<std::shared_ptr<const Dictionary>> Dictionary::Create(const std::vector<uint8_t>& bytes, int level,
                                                             bool raw_literals) {
  std::shared_ptr<Dictionary> d(new Dictionary());
  d->raw_literals_ = raw_literals;
  d->cdict_ = ZSTD_createCDict(bytes.data(), bytes.size(), level);
  d->ddict_ = ZSTD_createDDict(bytes.data(), bytes.size());
  if (d->cdict_ == nullptr || d->ddict_ == nullptr) return Corruption("zstd dictionary cannot be loaded");
  return std::shared_ptr<const Dictionary>(std::move(d));
}

Dictionary::~Dictionary() {
  ZSTD_freeCDict(static_cast<ZSTD_CDict*>(cdict_));
  ZSTD_freeDDict(static_cast<ZSTD_DDict*>(ddict_));
}

namespace {

Status EncodeRaw(CodecContext&, const uint8_t* src, size_t size, const Dictionary*, int, std::vector<uint8_t>* out) {
  out->assign(src, src + size);
  return Status::Ok();
}

Status DecodeRaw(CodecContext&, const uint8_t* stored, uint64_t stored_size, uint64_t raw_size, void* dst,
                 const Dictionary*) {
  if (stored_size != raw_size)
    return Corruption(std::string("raw blob of ") + std::to_string(stored_size) + " bytes, expected " +
                      std::to_string(raw_size));
  if (raw_size > 0) std::memcpy(dst, stored, raw_size);
  return Status::Ok();
}

// One frame made with `cdict` whose literals are stored raw; a zstd result code.
size_t CompressRawLiterals(ZSTD_CCtx* cctx, void* dst, size_t capacity, const uint8_t* src, size_t size,
                           const ZSTD_CDict* cdict) {
  size_t r = ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
  if (!ZSTD_isError(r)) r = ZSTD_CCtx_refCDict(cctx, cdict);
  if (!ZSTD_isError(r)) r = ZSTD_CCtx_setParameter(cctx, ZSTD_c_literalCompressionMode, ZSTD_ps_disable);
  return ZSTD_isError(r) ? r : ZSTD_compress2(cctx, dst, capacity, src, size);
}

// kZstd and kZstdDict: one frame, with the field's dictionary (and its choice of literals)
// when `dict` is given.
Status EncodeZstd(CodecContext& ctx, const uint8_t* src, size_t size, const Dictionary* dict, int level,
                  std::vector<uint8_t>* out) {
  ASSIGN_OR_RETURN(void* c, ctx.zstd_compression());
  auto* cctx = static_cast<ZSTD_CCtx*>(c);
  out->resize(ZSTD_compressBound(size));
  const auto* cdict = dict != nullptr ? static_cast<const ZSTD_CDict*>(dict->cdict()) : nullptr;
  const size_t n = cdict == nullptr       ? ZSTD_compressCCtx(cctx, out->data(), out->size(), src, size, level)
                   : dict->raw_literals() ? CompressRawLiterals(cctx, out->data(), out->size(), src, size, cdict)
                                          : ZSTD_compress_usingCDict(cctx, out->data(), out->size(), src, size, cdict);
  if (ZSTD_isError(n)) return Internal(std::string("zstd compression failed: ") + ZSTD_getErrorName(n));
  out->resize(n);
  return Status::Ok();
}

Status DecodeZstd(CodecContext& ctx, const uint8_t* stored, uint64_t stored_size, uint64_t raw_size, void* dst,
                  const Dictionary* dict) {
  const unsigned long long declared = ZSTD_getFrameContentSize(stored, stored_size);
  if (declared != raw_size)
    return Corruption(std::string("zstd frame declares ") +
                      (declared == ZSTD_CONTENTSIZE_ERROR     ? std::string("an invalid header")
                       : declared == ZSTD_CONTENTSIZE_UNKNOWN ? std::string("no content size")
                                                              : std::to_string(declared) + " bytes") +
                      ", expected " + std::to_string(raw_size));
  ASSIGN_OR_RETURN(void* d, ctx.zstd_decompression());
  auto* dctx = static_cast<ZSTD_DCtx*>(d);
  const size_t n = dict != nullptr ? ZSTD_decompress_usingDDict(dctx, dst, raw_size, stored, stored_size,
                                                                static_cast<const ZSTD_DDict*>(dict->ddict()))
                                   : ZSTD_decompressDCtx(dctx, dst, raw_size, stored, stored_size);
  if (ZSTD_isError(n)) return Corruption(std::string("zstd: ") + ZSTD_getErrorName(n));
  if (n != raw_size)
    return Corruption(std::string("decoded ") + std::to_string(n) + " bytes, expected " + std::to_string(raw_size));
  return Status::Ok();
}

}  // namespace

// Row k is codec number k (FORMAT.md 3.2). A new codec is a value of Codec, a row here with
// its encode and decode, and a round trip and corruption case in tests/format.
const CodecSpec kCodecs[] = {
    {Codec::kRaw, "raw", true, false, Codec::kRaw, 0, 0, &EncodeRaw, &DecodeRaw},
    {Codec::kZstd, "zstd", false, false, Codec::kZstdDict, 1, 19, &EncodeZstd, &DecodeZstd},
    {Codec::kZstdDict, "zstd+dict", false, true, Codec::kZstdDict, 1, 19, &EncodeZstd, &DecodeZstd},
};
const size_t kCodecCount = sizeof kCodecs / sizeof kCodecs[0];

Result<Codec> EncodeBlob(Codec codec, CodecContext& ctx, const uint8_t* src, size_t size, const Dictionary* dict,
                         int level, double min_ratio, std::vector<uint8_t>* out) {
  const CodecSpec* spec = FindCodec(codec);
  if (spec == nullptr) return InvalidArgument("unknown codec " + std::to_string(static_cast<int>(codec)));
  if (dict != nullptr) spec = FindCodec(spec->with_dictionary);
  RETURN_IF_ERROR(spec->encode(ctx, src, size, spec->uses_dictionary ? dict : nullptr, level, out));
  if (spec->in_place || static_cast<double>(out->size()) <= static_cast<double>(size) * min_ratio) return spec->codec;
  const CodecSpec& raw = *FindCodec(Codec::kRaw);
  RETURN_IF_ERROR(raw.encode(ctx, src, size, nullptr, 0, out));
  return raw.codec;
}

Status DecodeBlob(Codec codec, const uint8_t* stored, uint64_t stored_size, uint64_t raw_size, void* dst,
                  CodecContext* ctx, const Dictionary* dict) {
  const CodecSpec* spec = FindCodec(codec);
  if (spec == nullptr) return Corruption("unknown codec " + std::to_string(static_cast<int>(codec)));
  if (spec->uses_dictionary && dict == nullptr)
    return Corruption(std::string("blob uses a dictionary but the field has none"));
  if (ctx == nullptr) return ResourceExhausted("no codec context (none could be made)");
  return spec->decode(*ctx, stored, stored_size, raw_size, dst, spec->uses_dictionary ? dict : nullptr);
}

namespace {

// Transposes an n x elem byte matrix (rows of `elem` bytes) to elem x n, or back.
// Fixed element sizes let the compiler unroll the inner loop.
template <size_t E>
void Shuffle(const uint8_t* src, uint8_t* dst, size_t n) {
  for (size_t i = 0; i < n; ++i)
    for (size_t k = 0; k < E; ++k) dst[k * n + i] = src[i * E + k];
}
template <size_t E>
void Unshuffle(const uint8_t* src, uint8_t* dst, size_t n) {
  for (size_t i = 0; i < n; ++i)
    for (size_t k = 0; k < E; ++k) dst[i * E + k] = src[k * n + i];
}

}  // namespace

void ByteShuffle(const uint8_t* src, uint8_t* dst, size_t n, size_t elem) {
  switch (elem) {
    case 2:
      return Shuffle<2>(src, dst, n);
    case 4:
      return Shuffle<4>(src, dst, n);
    case 8:
      return Shuffle<8>(src, dst, n);
    default:
      for (size_t i = 0; i < n; ++i)
        for (size_t k = 0; k < elem; ++k) dst[k * n + i] = src[i * elem + k];
  }
}

void ByteUnshuffle(const uint8_t* src, uint8_t* dst, size_t n, size_t elem) {
  switch (elem) {
    case 2:
      return Unshuffle<2>(src, dst, n);
    case 4:
      return Unshuffle<4>(src, dst, n);
    case 8:
      return Unshuffle<8>(src, dst, n);
    default:
      for (size_t i = 0; i < n; ++i)
        for (size_t k = 0; k < elem; ++k) dst[i * elem + k] = src[k * n + i];
  }
}

namespace {

template <typename U>
void Delta(const uint8_t* src, uint8_t* dst, size_t rows, size_t cols) {
  constexpr size_t E = sizeof(U);
  for (size_t c = 0; c < cols; ++c) {
    U prev = 0;
    for (size_t r = 0; r < rows; ++r) {
      U v;
      std::memcpy(&v, src + (r * cols + c) * E, E);
      const auto d = static_cast<U>(v - prev);
      prev = v;
      for (size_t b = 0; b < E; ++b) dst[(c * E + b) * rows + r] = static_cast<uint8_t>(d >> (8 * b));
    }
  }
}

template <typename U>
void Undelta(const uint8_t* src, uint8_t* dst, size_t rows, size_t cols) {
  constexpr size_t E = sizeof(U);
  for (size_t c = 0; c < cols; ++c) {
    U acc = 0;
    for (size_t r = 0; r < rows; ++r) {
      U d = 0;
      for (size_t b = 0; b < E; ++b)
        d = static_cast<U>(d | static_cast<U>(static_cast<U>(src[(c * E + b) * rows + r]) << (8 * b)));
      acc = static_cast<U>(acc + d);
      std::memcpy(dst + (r * cols + c) * E, &acc, E);
    }
  }
}

}  // namespace

void DeltaColumns(const uint8_t* src, uint8_t* dst, size_t rows, size_t cols, size_t elem) {
  switch (elem) {
    case 1:
      return Delta<uint8_t>(src, dst, rows, cols);
    case 2:
      return Delta<uint16_t>(src, dst, rows, cols);
    case 4:
      return Delta<uint32_t>(src, dst, rows, cols);
    default:
      return Delta<uint64_t>(src, dst, rows, cols);
  }
}

void UndoDeltaColumns(const uint8_t* src, uint8_t* dst, size_t rows, size_t cols, size_t elem) {
  switch (elem) {
    case 1:
      return Undelta<uint8_t>(src, dst, rows, cols);
    case 2:
      return Undelta<uint16_t>(src, dst, rows, cols);
    case 4:
      return Undelta<uint32_t>(src, dst, rows, cols);
    default:
      return Undelta<uint64_t>(src, dst, rows, cols);
  }
}

Result<bool> RawLiteralsPay(const std::vector<std::vector<uint8_t>>& samples, const std::vector<uint8_t>& dict,
                            int level) {
  size_t total = 0;
  for (const auto& s : samples) total += s.size();
  if (total == 0) return false;
  ASSIGN_OR_RETURN(const auto huffman, Dictionary::Create(dict, level, false));
  ASSIGN_OR_RETURN(const auto raw, Dictionary::Create(dict, level, true));
  const size_t step = (total + kRawLiteralsProbeBytes - 1) / kRawLiteralsProbeBytes;  // every step-th sample
  CodecContext ctx;
  std::vector<uint8_t> frame;
  double with_huffman = 0, with_raw = 0;
  for (size_t i = 0; i < samples.size(); i += step) {
    RETURN_IF_ERROR(EncodeZstd(ctx, samples[i].data(), samples[i].size(), huffman.get(), level, &frame));
    with_huffman += static_cast<double>(frame.size());
    RETURN_IF_ERROR(EncodeZstd(ctx, samples[i].data(), samples[i].size(), raw.get(), level, &frame));
    with_raw += static_cast<double>(frame.size());
  }
  return with_raw <= with_huffman * (1 + kRawLiteralsMaxGrowth);
}

Result<std::vector<uint8_t>> TrainDictionary(const std::vector<std::vector<uint8_t>>& samples, size_t dict_bytes) {
  std::vector<uint8_t> joined;
  std::vector<size_t> sizes;
  for (const auto& s : samples) {
    joined.insert(joined.end(), s.begin(), s.end());
    sizes.push_back(s.size());
  }
  std::vector<uint8_t> dict(dict_bytes);
  const size_t n =
      ZDICT_trainFromBuffer(dict.data(), dict.size(), joined.data(), sizes.data(), static_cast<unsigned>(sizes.size()));
  if (ZDICT_isError(n))
    return InvalidArgument(std::string("zstd dictionary training failed: ") + ZDICT_getErrorName(n));
  dict.resize(n);
  return dict;
}

}  // namespace shardify::detail

namespace shardify {

const char* CodecName(Codec c) {
  const detail::CodecSpec* spec = detail::FindCodec(c);
  return spec != nullptr ? spec->name : "?";
}

}  // namespace shardify
