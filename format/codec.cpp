#include <zdict.h>
#include <zstd.h>

#include <cstring>

#include "format/codec_internal.h"

namespace shardify::detail {

Result<std::shared_ptr<const ZstdDictionary>> ZstdDictionary::Create(const std::vector<uint8_t>& bytes, int level) {
  std::shared_ptr<ZstdDictionary> d(new ZstdDictionary());
  d->cdict_ = ZSTD_createCDict(bytes.data(), bytes.size(), level);
  d->ddict_ = ZSTD_createDDict(bytes.data(), bytes.size());
  if (d->cdict_ == nullptr || d->ddict_ == nullptr) return Corruption("zstd dictionary cannot be loaded");
  return std::shared_ptr<const ZstdDictionary>(std::move(d));
}

ZstdDictionary::~ZstdDictionary() {
  ZSTD_freeCDict(static_cast<ZSTD_CDict*>(cdict_));
  ZSTD_freeDDict(static_cast<ZSTD_DDict*>(ddict_));
}

Compressor::Compressor(int level) : cctx_(ZSTD_createCCtx()), level_(level) {}
Compressor::~Compressor() { ZSTD_freeCCtx(static_cast<ZSTD_CCtx*>(cctx_)); }

Result<Codec> Compressor::Compress(const uint8_t* src, size_t size, const ZstdDictionary* dict, double min_ratio,
                                   std::vector<uint8_t>* out, int level) {
  auto* cctx = static_cast<ZSTD_CCtx*>(cctx_);
  if (cctx == nullptr) return ResourceExhausted("cannot create a zstd context");
  out->resize(ZSTD_compressBound(size));
  size_t n;
  if (dict != nullptr) {
    n = ZSTD_compress_usingCDict(cctx, out->data(), out->size(), src, size,
                                 static_cast<const ZSTD_CDict*>(dict->cdict()));
  } else {
    n = ZSTD_compressCCtx(cctx, out->data(), out->size(), src, size, level > 0 ? level : level_);
  }
  if (ZSTD_isError(n)) return Internal(std::string("zstd compression failed: ") + ZSTD_getErrorName(n));
  if (static_cast<double>(n) <= static_cast<double>(size) * min_ratio) {
    out->resize(n);
    return dict != nullptr ? Codec::kZstdDict : Codec::kZstd;
  }
  out->assign(src, src + size);
  return Codec::kRaw;
}

Status DecodeBlob(Codec codec, const uint8_t* stored, uint64_t stored_size, uint64_t raw_size, void* dst, void* dctx,
                  const ZstdDictionary* dict) {
  if (codec == Codec::kRaw) {
    if (stored_size != raw_size)
      return Corruption(std::string("raw blob of ") + std::to_string(stored_size) + " bytes, expected " +
                        std::to_string(raw_size));
    if (raw_size > 0) std::memcpy(dst, stored, raw_size);
    return Status::Ok();
  }
  if (codec == Codec::kZstdDict && dict == nullptr)
    return Corruption(std::string("blob uses a dictionary but the field has none"));
  const unsigned long long declared = ZSTD_getFrameContentSize(stored, stored_size);
  if (declared != raw_size)
    return Corruption(std::string("zstd frame declares ") +
                      (declared == ZSTD_CONTENTSIZE_ERROR     ? std::string("an invalid header")
                       : declared == ZSTD_CONTENTSIZE_UNKNOWN ? std::string("no content size")
                                                              : std::to_string(declared) + " bytes") +
                      ", expected " + std::to_string(raw_size));
  auto* ctx = static_cast<ZSTD_DCtx*>(dctx);
  if (ctx == nullptr) return ResourceExhausted("no zstd decompression context (out of memory when it was made)");
  const size_t n = codec == Codec::kZstdDict ? ZSTD_decompress_usingDDict(ctx, dst, raw_size, stored, stored_size,
                                                                          static_cast<const ZSTD_DDict*>(dict->ddict()))
                                             : ZSTD_decompressDCtx(ctx, dst, raw_size, stored, stored_size);
  if (ZSTD_isError(n)) return Corruption(std::string("zstd: ") + ZSTD_getErrorName(n));
  if (n != raw_size)
    return Corruption(std::string("decoded ") + std::to_string(n) + " bytes, expected " + std::to_string(raw_size));
  return Status::Ok();
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

Result<std::vector<uint8_t>> TrainZstdDictionary(const std::vector<std::vector<uint8_t>>& samples, size_t dict_bytes) {
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
