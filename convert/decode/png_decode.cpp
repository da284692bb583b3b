// PNG decoding with libpng (see decode_internal.h).
#include <fcntl.h>
#include <png.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <optional>
#include <vector>

#include "convert/decode/decode_internal.h"
#include "convert/decode/gz_internal.h"
#include "convert/sources/source_internal.h"

namespace shardify::convert::detail {
namespace {

constexpr uint64_t kMaxPngBytes = 4ull << 30;

// Owns the libpng state and the file. The functions that call setjmp below hold no
// objects with destructors, so a longjmp out of libpng skips nothing.
struct PngReader {
  const uint8_t* data = nullptr;  // the file bytes (all of them, or a prefix for headers)
  size_t size = 0;
  size_t pos = 0;
  png_structp png = nullptr;
  png_infop info = nullptr;
  char error[256] = {};
  ~PngReader() {
    if (png != nullptr) png_destroy_read_struct(&png, info != nullptr ? &info : nullptr, nullptr);
  }
};

extern "C" void PngRead(png_structp png, png_bytep out, size_t n) {
  auto* r = static_cast<PngReader*>(png_get_io_ptr(png));
  if (n > r->size - r->pos) png_error(png, "unexpected end of file (truncated PNG)");
  std::memcpy(out, r->data + r->pos, n);
  r->pos += n;
}

// Owns a file descriptor.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

Status ReadFileBytes(const std::string& path, size_t limit, uint64_t max_size, std::vector<uint8_t>* out,
                     uint64_t* file_size) {
  Fd f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) return IOError(path + ": cannot open: " + std::strerror(errno));
  struct stat st;
  if (::fstat(f.fd, &st) != 0) return IOError(path + ": cannot stat: " + std::strerror(errno));
  *file_size = static_cast<uint64_t>(st.st_size);
  if (*file_size > max_size)
    return ResourceExhausted(path + ": file too large (" + std::to_string(*file_size) + " bytes)");
  size_t want = limit > 0 ? std::min<size_t>(limit, *file_size) : *file_size;
  out->resize(want);
  size_t done = 0;
  while (done < want) {
    ssize_t got = ::read(f.fd, out->data() + done, want - done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return IOError(path + ": cannot read: " + std::strerror(errno));
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  out->resize(done);
  return Status::Ok();
}

Status CheckDecodedSize(const std::string& path, const Shape& shape, DType dtype, uint64_t max_bytes) {
  const Result<uint64_t> bytes = ByteSize(shape, dtype);
  if (bytes.ok() && *bytes <= max_bytes) return Status::Ok();
  return ResourceExhausted(path + ": " + ShapeToString(shape) + " " + DTypeName(dtype) + " decodes to " +
                           (bytes.ok() ? HumanBytes(*bytes) : std::string("more than 2^64 bytes")) +
                           ", more than the per-sample memory limit of " + HumanBytes(max_bytes) +
                           " (--max-sample-memory)");
}

namespace {

extern "C" void PngError(png_structp png, png_const_charp msg) {
  auto* r = static_cast<PngReader*>(png_get_error_ptr(png));
  std::snprintf(r->error, sizeof r->error, "%s", msg != nullptr ? msg : "libpng error");
  png_longjmp(png, 1);
}

extern "C" void PngWarning(png_structp, png_const_charp) {}

struct PngHeader {
  uint32_t width = 0, height = 0;
  int channels = 0, bit_depth = 0;  // as decoded, with the alpha channel of a tRNS chunk
  size_t row_bytes = 0;             // of the rows libpng writes
  uint64_t stored_bytes = 0;        // image data before expansion, without filter bytes
  // 1/2/4-bit gray with a tRNS chunk: libpng reads the gray values unscaled, ReadPng adds
  // the alpha channel (0 where a pixel is this transparent gray value, else 255).
  std::optional<uint16_t> transparent_gray;
};

bool ReadHeader(PngReader* r, PngHeader* h) {
  if (setjmp(png_jmpbuf(r->png))) return false;
  png_set_read_fn(r->png, r, PngRead);
  png_read_info(r->png, r->info);
  const int color = png_get_color_type(r->png, r->info);
  const int depth = png_get_bit_depth(r->png, r->info);
  const uint64_t stored_row = (uint64_t{png_get_image_width(r->png, r->info)} * png_get_channels(r->png, r->info) *
                                   static_cast<uint64_t>(depth) +
                               7) /
                              8;
  h->stored_bytes = uint64_t{png_get_image_height(r->png, r->info)} * stored_row;
  // Every sample keeps its stored value (1/2/4-bit gray: 0..2^bits-1, unpacked to a byte);
  // a tRNS chunk adds an alpha channel of 0 (transparent) or the largest value. libpng's
  // tRNS expansion would also scale low-bit gray to 0..255, so that alpha is made here.
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(r->png);
  if (png_get_valid(r->png, r->info, PNG_INFO_tRNS)) {
    png_color_16p trans = nullptr;
    if (color == PNG_COLOR_TYPE_GRAY && depth < 8 &&
        png_get_tRNS(r->png, r->info, nullptr, nullptr, &trans) == PNG_INFO_tRNS && trans != nullptr) {
      h->transparent_gray = trans->gray;
    } else {
      png_set_tRNS_to_alpha(r->png);
    }
  }
  if (depth < 8) png_set_packing(r->png);
  if (depth == 16) png_set_swap(r->png);
  png_set_interlace_handling(r->png);
  png_read_update_info(r->png, r->info);
  h->width = png_get_image_width(r->png, r->info);
  h->height = png_get_image_height(r->png, r->info);
  h->channels = png_get_channels(r->png, r->info) + (h->transparent_gray ? 1 : 0);
  h->bit_depth = png_get_bit_depth(r->png, r->info);
  h->row_bytes = png_get_rowbytes(r->png, r->info);
  return true;
}

bool ReadRows(PngReader* r, png_bytep* rows) {
  if (setjmp(png_jmpbuf(r->png))) return false;
  png_read_image(r->png, rows);
  png_read_end(r->png, nullptr);
  return true;
}

// Parses the header from bytes[0, size) (a prefix of the file, whose whole size is
// `file_size`, is enough) and checks the dimensions against the file and `max_bytes`.
Status Open(const std::string& path, const std::vector<uint8_t>& bytes, uint64_t file_size, uint64_t max_bytes,
            PngReader* r, PngHeader* h, ImageInfo* info) {
  if (bytes.empty()) return Corruption(path + ": empty file (0 bytes)");
  if (bytes.size() < 8 || png_sig_cmp(bytes.data(), 0, 8) != 0)
    return Corruption(path + ": not a PNG file (bad signature)");
  r->data = bytes.data();
  r->size = bytes.size();
  r->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, r, PngError, PngWarning);
  if (r->png == nullptr) return Internal(path + ": cannot create a PNG reader");
  r->info = png_create_info_struct(r->png);
  if (r->info == nullptr) return Internal(path + ": cannot create a PNG reader");
  if (!ReadHeader(r, h)) return Corruption(path + ": bad PNG header: " + r->error);
  if (h->channels < 1 || h->channels > 4 || (h->bit_depth != 8 && h->bit_depth != 16)) {
    return Unsupported(path + ": PNG with " + std::to_string(h->channels) + " channels of " +
                       std::to_string(h->bit_depth) + " bits after expansion");
  }
  info->kind = ImageKind::kPng;
  info->dtype = h->bit_depth == 16 ? DType::kU16 : DType::kU8;
  info->shape = {h->channels, static_cast<int64_t>(h->height), static_cast<int64_t>(h->width)};
  if (h->stored_bytes / kMaxDeflateRatio >= file_size) {
    return Corruption(path + ": the header claims " + std::to_string(h->width) + "x" + std::to_string(h->height) +
                      " pixels (" + std::to_string(h->stored_bytes) + " bytes of image data), but the file has only " +
                      std::to_string(file_size) + " bytes (inflating at most " + std::to_string(kMaxDeflateRatio) +
                      "x)");
  }
  RETURN_IF_ERROR(CheckDecodedSize(path, info->shape, info->dtype, max_bytes));
  auto need = ByteSize(info->shape, info->dtype);
  if (!need.ok() || h->row_bytes * h->height * (h->transparent_gray ? 2 : 1) != *need) {
    return ResourceExhausted(path + ": PNG of " + ShapeToString(info->shape) + " is too large or inconsistent");
  }
  return Status::Ok();
}

}  // namespace

Result<ImageInfo> ReadPngInfo(const std::string& path, std::vector<uint8_t>* small_file, uint64_t max_bytes) {
  std::vector<uint8_t> bytes;
  uint64_t file_size = 0;
  RETURN_IF_ERROR(ReadFileBytes(path, 4096, kMaxPngBytes, &bytes, &file_size));
  ImageInfo info;
  {
    PngReader r;
    PngHeader h;
    const Status opened = Open(path, bytes, file_size, max_bytes, &r, &h, &info);
    if (opened.code() == StatusCode::kResourceExhausted) return opened;  // the header was read: it stands
    if (opened.ok()) {
      info.file_bytes = file_size;
      if (small_file != nullptr && bytes.size() == file_size) *small_file = std::move(bytes);
      return info;
    }
  }
  if (bytes.size() == file_size) {  // the whole file was read: the error stands
    PngReader r;
    PngHeader h;
    RETURN_IF_ERROR(Open(path, bytes, file_size, max_bytes, &r, &h, &info));
  }
  // Chunks before the image data are longer than the prefix: read it all.
  RETURN_IF_ERROR(ReadFileBytes(path, 0, kMaxPngBytes, &bytes, &file_size));
  PngReader r;
  PngHeader h;
  RETURN_IF_ERROR(Open(path, bytes, file_size, max_bytes, &r, &h, &info));
  info.file_bytes = file_size;
  return info;
}

Result<DecodedImage> ReadPng(const std::string& path, const std::vector<uint8_t>* file_bytes, uint64_t max_bytes) {
  std::vector<uint8_t> own;
  uint64_t file_size = 0;
  if (file_bytes == nullptr || file_bytes->empty()) {
    RETURN_IF_ERROR(ReadFileBytes(path, 0, kMaxPngBytes, &own, &file_size));
    file_bytes = &own;
  }
  const std::vector<uint8_t>& bytes = *file_bytes;
  file_size = bytes.size();
  PngReader r;
  PngHeader h;
  DecodedImage out;
  RETURN_IF_ERROR(Open(path, bytes, file_size, max_bytes, &r, &h, &out.info));
  out.info.file_bytes = file_size;
  std::vector<uint8_t> inter(h.row_bytes * h.height);
  std::vector<png_bytep> rows(h.height);
  for (uint32_t y = 0; y < h.height; ++y) rows[y] = inter.data() + y * h.row_bytes;
  if (!ReadRows(&r, rows.data())) return Corruption(path + ": cannot decode PNG: " + r.error);
  const size_t es = h.bit_depth / 8, hw = static_cast<size_t>(h.width) * h.height, c = static_cast<size_t>(h.channels);
  if (h.transparent_gray) {  // planar already: the gray plane, then its alpha
    out.pixels = std::move(inter);
    out.pixels.resize(2 * hw);
    for (size_t p = 0; p < hw; ++p) out.pixels[hw + p] = out.pixels[p] == *h.transparent_gray ? 0 : 255;
    return out;
  }
  if (c == 1) {
    out.pixels = std::move(inter);
    return out;
  }
  out.pixels.resize(inter.size());
  for (size_t p = 0; p < hw; ++p) {
    for (size_t k = 0; k < c; ++k) std::memcpy(&out.pixels[(k * hw + p) * es], &inter[(p * c + k) * es], es);
  }
  return out;
}

}  // namespace shardify::convert::detail
