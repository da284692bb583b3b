// PNG and JPEG decoding with libpng and libjpeg directly (internal). ITK's PNG reader aborts the process on
// some corrupt files (libpng errors without a jump target), so PNGs are read here with
// every libpng error turned into a Status. libpng prints nothing.
//
// Transforms: palette -> RGB (RGBA when a tRNS chunk is present), a tRNS chunk on gray or
// RGB -> an alpha channel, 1/2/4-bit gray unpacked to one byte per pixel keeping the
// stored values (0..2^bits-1), 16-bit samples to little-endian u16.
#pragma once

#include <string>

#include "convert/decode/image_io.h"

namespace shardify::convert::detail {

// See ReadImageInfo / ReadImage in image_io.h for `small_file` and `file_bytes`.
// The header's dimensions are checked against `max_bytes` and against the file's size (its
// deflated data expands at most kMaxDeflateRatio times) before pixels are allocated.
Result<ImageInfo> ReadPngInfo(const std::string& path, std::vector<uint8_t>* small_file, uint64_t max_bytes);
Result<DecodedImage> ReadPng(const std::string& path, const std::vector<uint8_t>* file_bytes, uint64_t max_bytes);

// JPEG through libjpeg, likewise: errors become a Status, warnings are not printed, a
// stream that ends early is an error. Gray stays 1 channel, color becomes RGB, CMYK 4.
// The dimensions are checked against `max_bytes`, and for sequential Huffman-coded files
// against the file's size (at least 2 bits per 8x8 block); progressive and arithmetic-coded
// JPEG have no such bound.
Result<ImageInfo> ReadJpegInfo(const std::string& path, std::vector<uint8_t>* small_file, uint64_t max_bytes);
Result<DecodedImage> ReadJpeg(const std::string& path, const std::vector<uint8_t>* file_bytes, uint64_t max_bytes);

// ResourceExhausted naming `path` when an image of `shape` and `dtype` decodes to more than
// `max_bytes` (see ReadImage).
Status CheckDecodedSize(const std::string& path, const Shape& shape, DType dtype, uint64_t max_bytes);

// Reads up to `limit` bytes of `path` (all when 0) and the file's size. Refuses files
// larger than `max_size`.
Status ReadFileBytes(const std::string& path, size_t limit, uint64_t max_size, std::vector<uint8_t>* out,
                     uint64_t* file_size);

}  // namespace shardify::convert::detail
