// zstd compression and bounded decompression of blobs; dictionary training.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "format/layout.h"
#include "format/status.h"

namespace shardify::detail {

// Shared, immutable compression / decompression dictionaries of one field.
class ZstdDictionary {
 public:
  static Result<std::shared_ptr<const ZstdDictionary>> Create(const std::vector<uint8_t>& bytes, int level);
  ~ZstdDictionary();
  ZstdDictionary(const ZstdDictionary&) = delete;
  ZstdDictionary& operator=(const ZstdDictionary&) = delete;
  const void* cdict() const { return cdict_; }
  const void* ddict() const { return ddict_; }

 private:
  ZstdDictionary() = default;
  void* cdict_ = nullptr;
  void* ddict_ = nullptr;
};

// Per-thread compressor.
class Compressor {
 public:
  explicit Compressor(int level);
  ~Compressor();
  Compressor(const Compressor&) = delete;
  Compressor& operator=(const Compressor&) = delete;
  // Compresses src into *out (replacing its contents) and returns the codec used: zstd
  // (with `dict` when given) when stored <= size * min_ratio, otherwise raw (a copy).
  // `level` (1..19) overrides the compressor's level; a dictionary has its own.
  Result<Codec> Compress(const uint8_t* src, size_t size, const ZstdDictionary* dict, double min_ratio,
                         std::vector<uint8_t>* out, int level = 0);

 private:
  void* cctx_;
  int level_;
};

// Decodes `stored` into dst (exactly raw_size bytes). Never writes past dst + raw_size and
// checks that the frame declares and produces exactly raw_size bytes. Allocates nothing
// unless it fails; callers add where the blob is to the error.
Status DecodeBlob(Codec codec, const uint8_t* stored, uint64_t stored_size, uint64_t raw_size, void* dst, void* dctx,
                  const ZstdDictionary* dict);

// Byte shuffle of `n` elements of `elem` bytes (Filter::kByteShuffle): dst[k * n + i] =
// src[i * elem + k], and its inverse. src and dst hold n * elem bytes and do not overlap.
void ByteShuffle(const uint8_t* src, uint8_t* dst, size_t n, size_t elem);
void ByteUnshuffle(const uint8_t* src, uint8_t* dst, size_t n, size_t elem);

// Delta columns (Filter::kDeltaColumns) of a table of `rows` x `cols` elements of `elem`
// bytes (1, 2, 4 or 8): dst[(c * elem + b) * rows + r] = byte b of x[r][c] - x[r-1][c]
// (x[-1][c] = 0; unsigned, modulo 2^(8 elem)), and its inverse. src and dst hold
// rows * cols * elem bytes and do not overlap.
void DeltaColumns(const uint8_t* src, uint8_t* dst, size_t rows, size_t cols, size_t elem);
void UndoDeltaColumns(const uint8_t* src, uint8_t* dst, size_t rows, size_t cols, size_t elem);

Result<std::vector<uint8_t>> TrainZstdDictionary(const std::vector<std::vector<uint8_t>>& samples, size_t dict_bytes);

}  // namespace shardify::detail
