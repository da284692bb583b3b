// The codec table (compression and bounded decompression of blobs), dictionary training,
// and the byte filters applied before compression.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/layout.h"

namespace shardify::detail {

// Per-thread state of the codecs (zstd's compression and decompression contexts), each
// made when first needed. One that cannot be made gives ResourceExhausted, and the next
// call tries again.
class CodecContext {
 public:
  CodecContext() = default;
  ~CodecContext();
  CodecContext(const CodecContext&) = delete;
  CodecContext& operator=(const CodecContext&) = delete;
  Result<void*> zstd_compression();
  Result<void*> zstd_decompression();

 private:
  void* cctx_ = nullptr;
  void* dctx_ = nullptr;
};

// A field's trained dictionary (FieldSpec::dictionary), loaded for the codec that uses it
// (Codec::kZstdDict); shared and immutable.
class Dictionary {
 public:
  // `level` is the compression level the dictionary is prepared for (1..19). With
  // `raw_literals`, the frames made with it store their literals as they are instead of
  // Huffman-coded (readers need not know: either is a zstd frame).
  static Result<std::shared_ptr<const Dictionary>> Create(const std::vector<uint8_t>& bytes, int level,
                                                          bool raw_literals = false);
  ~Dictionary();
  Dictionary(const Dictionary&) = delete;
  Dictionary& operator=(const Dictionary&) = delete;
  const void* cdict() const { return cdict_; }
  const void* ddict() const { return ddict_; }
  bool raw_literals() const { return raw_literals_; }

 private:
  Dictionary() = default;
  void* cdict_ = nullptr;
  void* ddict_ = nullptr;
  bool raw_literals_ = false;
};

// Raw literals (Dictionary::Create) halve the instructions of decoding a small frame: no
// Huffman table to read and build per frame (Fashion-MNIST's 28x28 u8 images at level 9:
// 6.4k instead of 14.4k a frame, for 4.9% more bytes). They pay where samples are small and
// their literals do not compress much; noisy ones cost far more bytes (byte-shuffled 16-bit
// noise: 29% more). So a field takes them when, over samples like its own, its frames grow
// by at most kRawLiteralsMaxGrowth, measured on at most kRawLiteralsProbeBytes of them.
inline constexpr double kRawLiteralsMaxGrowth = 0.08;
inline constexpr size_t kRawLiteralsProbeBytes = 4 << 20;

// Whether the frames that `dict` makes of `samples` (as they will be compressed, filtered)
// grow by at most kRawLiteralsMaxGrowth in all with raw literals. Deterministic: it reads
// evenly spaced samples up to kRawLiteralsProbeBytes. No samples: false.
Result<bool> RawLiteralsPay(const std::vector<std::vector<uint8_t>>& samples, const std::vector<uint8_t>& dict,
                            int level);

// One row per Codec value: the one place that says what a codec is and how it codes.
struct CodecSpec {
  Codec codec;
  const char* name;  // as shardtool shows it
  // The stored bytes are the array: the blob starts at a multiple of kBlobAlignment, its
  // stored size equals its raw size, and readers may copy or use it in place.
  bool in_place;
  bool uses_dictionary;      // decoding needs the field's dictionary
  Codec with_dictionary;     // what the writer stores instead when the field has a dictionary
  int min_level, max_level;  // levels the writer accepts (0, 0: the codec has none)
  // Replaces *out with the encoding of size bytes at src. `dict` is the field's dictionary
  // (uses_dictionary only), `level` within [min_level, max_level].
  Status (*encode)(CodecContext& ctx, const uint8_t* src, size_t size, const Dictionary* dict, int level,
                   std::vector<uint8_t>* out);
  // Decodes `stored` into exactly raw_size bytes at dst; never writes past dst + raw_size.
  Status (*decode)(CodecContext& ctx, const uint8_t* stored, uint64_t stored_size, uint64_t raw_size, void* dst,
                   const Dictionary* dict);
};

// The table, row k for codec number k (format/codec.cpp).
extern const CodecSpec kCodecs[];
extern const size_t kCodecCount;

// The row of codec number `id` as stored on disk; nullptr when this version has none.
inline const CodecSpec* FindCodec(uint8_t id) { return id < kCodecCount ? &kCodecs[id] : nullptr; }
inline const CodecSpec* FindCodec(Codec c) { return FindCodec(static_cast<uint8_t>(c)); }

// Whether blobs of codec `c` are stored as the array itself (CodecSpec::in_place). Called
// once per blob read: one load.
inline bool StoredInPlace(Codec c) {
  const CodecSpec* spec = FindCodec(c);
  return spec != nullptr && spec->in_place;
}

// Encodes size bytes at src with `codec` (its dictionary variant when `dict` is given) into
// *out, and returns the codec used: a blob that does not shrink to size * min_ratio or
// below is stored raw (a copy).
Result<Codec> EncodeBlob(Codec codec, CodecContext& ctx, const uint8_t* src, size_t size, const Dictionary* dict,
                         int level, double min_ratio, std::vector<uint8_t>* out);

// Decodes `stored` into dst (exactly raw_size bytes) with the codec's row. Never writes past
// dst + raw_size and checks that the blob declares and produces exactly raw_size bytes.
// Allocates nothing unless it fails (or makes ctx's context); a null ctx gives
// ResourceExhausted. Callers add where the blob is to the error.
Status DecodeBlob(Codec codec, const uint8_t* stored, uint64_t stored_size, uint64_t raw_size, void* dst,
                  CodecContext* ctx, const Dictionary* dict);

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

// Trains a dictionary (for Codec::kZstdDict) of at most dict_bytes bytes from samples.
Result<std::vector<uint8_t>> TrainDictionary(const std::vector<std::vector<uint8_t>>& samples, size_t dict_bytes);

}  // namespace shardify::detail
