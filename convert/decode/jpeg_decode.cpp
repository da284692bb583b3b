// JPEG decoding with libjpeg (see decode_internal.h).
#include <cstddef>
#include <cstdio>
// clang-format off: jpeglib.h needs size_t and FILE first
#include <jerror.h>
#include <jpeglib.h>
// clang-format on

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <vector>

#include "convert/decode/decode_internal.h"

namespace shardify::convert::detail {
namespace {

constexpr uint64_t kMaxJpegBytes = 2ull << 30;

struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  bool truncated;
};

extern "C" void JpegErrorExit(j_common_ptr c) {
  auto* e = reinterpret_cast<JpegError*>(c->err);
  (*c->err->format_message)(c, e->message);
  std::longjmp(e->jump, 1);
}

extern "C" void JpegEmit(j_common_ptr c, int level) {
  auto* e = reinterpret_cast<JpegError*>(c->err);
  if (level < 0 && c->err->msg_code == JWRN_JPEG_EOF) e->truncated = true;  // else stay quiet
}

// Owns the libjpeg state. The setjmp functions below hold no objects with destructors.
struct JpegReader {
  jpeg_decompress_struct cinfo{};
  JpegError err{};
  bool created = false;
  ~JpegReader() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
};

bool ReadHeader(JpegReader* r, const uint8_t* data, size_t size) {
  r->cinfo.err = jpeg_std_error(&r->err.mgr);
  r->err.mgr.error_exit = JpegErrorExit;
  r->err.mgr.emit_message = JpegEmit;
  if (setjmp(r->err.jump)) return false;
  jpeg_create_decompress(&r->cinfo);
  r->created = true;
  jpeg_mem_src(&r->cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&r->cinfo, TRUE);
  const int n = r->cinfo.num_components;
  r->cinfo.out_color_space = n == 1 ? JCS_GRAYSCALE : n == 3 ? JCS_RGB : JCS_CMYK;
  jpeg_calc_output_dimensions(&r->cinfo);
  return true;
}

bool ReadRows(JpegReader* r, uint8_t* out, size_t row_bytes) {
  if (setjmp(r->err.jump)) return false;
  jpeg_start_decompress(&r->cinfo);
  while (r->cinfo.output_scanline < r->cinfo.output_height) {
    JSAMPROW row = out + static_cast<size_t>(r->cinfo.output_scanline) * row_bytes;
    jpeg_read_scanlines(&r->cinfo, &row, 1);
  }
  jpeg_finish_decompress(&r->cinfo);
  return true;
}

// A sequential Huffman-coded JPEG stores at least 2 bits (a DC and an end-of-block code) for
// every 8x8 block of each component it has a scan for, and it has one for some component;
// so a file of S bytes holds at most 4 * S blocks of its smallest component. Progressive
// and arithmetic-coded files have no such bound (end-of-band runs, sub-bit codes): for
// them only the per-sample limit applies.
Status CheckBlocks(const std::string& path, const jpeg_decompress_struct& c, uint64_t file_size) {
  if (c.progressive_mode || c.arith_code || c.num_components < 1) return Status::Ok();
  uint64_t fewest = UINT64_MAX;
  for (int k = 0; k < c.num_components; ++k) {
    fewest = std::min<uint64_t>(fewest, uint64_t{c.comp_info[k].width_in_blocks} * c.comp_info[k].height_in_blocks);
  }
  if (fewest / 4 <= file_size) return Status::Ok();
  return Corruption(path + ": the header claims " + std::to_string(c.image_width) + "x" +
                    std::to_string(c.image_height) + " pixels (" + std::to_string(fewest) +
                    " 8x8 blocks of its smallest component, 2 bits each at " + "least), but the file has only " +
                    std::to_string(file_size) + " bytes");
}

Status Open(const std::string& path, const std::vector<uint8_t>& bytes, uint64_t file_size, uint64_t max_bytes,
            JpegReader* r, ImageInfo* info) {
  if (bytes.empty()) return Corruption(path + ": empty file (0 bytes)");
  if (bytes.size() < 3 || bytes[0] != 0xFF || bytes[1] != 0xD8 || bytes[2] != 0xFF) {
    return Corruption(path + ": not a JPEG file (bad SOI marker)");
  }
  if (!ReadHeader(r, bytes.data(), bytes.size())) return Corruption(path + ": bad JPEG header: " + r->err.message);
  const int c = r->cinfo.output_components;
  if (c != 1 && c != 3 && c != 4) return Unsupported(path + ": JPEG with " + std::to_string(c) + " components");
  info->kind = ImageKind::kJpeg;
  info->dtype = DType::kU8;
  info->shape = {c, static_cast<int64_t>(r->cinfo.output_height), static_cast<int64_t>(r->cinfo.output_width)};
  RETURN_IF_ERROR(CheckBlocks(path, r->cinfo, file_size));
  return CheckDecodedSize(path, info->shape, info->dtype, std::min(max_bytes, kMaxJpegBytes));
}

}  // namespace

Result<ImageInfo> ReadJpegInfo(const std::string& path, std::vector<uint8_t>* small_file, uint64_t max_bytes) {
  std::vector<uint8_t> bytes;
  uint64_t file_size = 0;
  RETURN_IF_ERROR(ReadFileBytes(path, 4096, kMaxJpegBytes, &bytes, &file_size));
  ImageInfo info;
  {
    JpegReader r;
    const Status opened = Open(path, bytes, file_size, max_bytes, &r, &info);
    if (opened.code() == StatusCode::kResourceExhausted) return opened;  // the header was read: it stands
    if (opened.ok() && !r.err.truncated) {
      info.file_bytes = file_size;
      if (small_file != nullptr && bytes.size() == file_size) *small_file = std::move(bytes);
      return info;
    }
  }
  if (bytes.size() < file_size) RETURN_IF_ERROR(ReadFileBytes(path, 0, kMaxJpegBytes, &bytes, &file_size));
  JpegReader r;
  RETURN_IF_ERROR(Open(path, bytes, file_size, max_bytes, &r, &info));
  info.file_bytes = file_size;
  return info;
}

Result<DecodedImage> ReadJpeg(const std::string& path, const std::vector<uint8_t>* file_bytes, uint64_t max_bytes) {
  std::vector<uint8_t> own;
  uint64_t file_size = 0;
  if (file_bytes == nullptr || file_bytes->empty()) {
    RETURN_IF_ERROR(ReadFileBytes(path, 0, kMaxJpegBytes, &own, &file_size));
    file_bytes = &own;
  }
  JpegReader r;
  DecodedImage out;
  RETURN_IF_ERROR(Open(path, *file_bytes, file_bytes->size(), max_bytes, &r, &out.info));
  out.info.file_bytes = file_bytes->size();
  ASSIGN_OR_RETURN(uint64_t n, ByteSize(out.info.shape, out.info.dtype));
  const size_t c = static_cast<size_t>(out.info.shape[0]);
  const size_t hw = static_cast<size_t>(out.info.shape[1] * out.info.shape[2]);
  std::vector<uint8_t> inter(n);
  if (!ReadRows(&r, inter.data(), static_cast<size_t>(out.info.shape[2]) * c)) {
    return Corruption(path + ": cannot decode JPEG: " + r.err.message);
  }
  if (r.err.truncated) return Corruption(path + ": truncated JPEG (premature end of data)");
  if (c == 1) {
    out.pixels = std::move(inter);
    return out;
  }
  out.pixels.resize(inter.size());
  for (size_t p = 0; p < hw; ++p) {
    for (size_t k = 0; k < c; ++k) out.pixels[k * hw + p] = inter[p * c + k];
  }
  return out;
}

}  // namespace shardify::convert::detail
