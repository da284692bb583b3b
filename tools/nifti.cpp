#include "tools/nifti.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "base/strings.h"
#include "media/nifti.h"

namespace shardify::tools {

Result<std::vector<uint8_t>> BuildNiftiImage(const std::vector<uint8_t>& header, const uint8_t* voxels, size_t size,
                                             DType dtype) {
  ASSIGN_OR_RETURN(media::NiftiHeader h, media::ParseStoredNiftiHeader(header.data(), header.size()));
  ASSIGN_OR_RETURN(const uint64_t voxel_bytes, media::NiftiVoxelBytes(h));
  const size_t es = DTypeSize(dtype);
  if (es * 8 != static_cast<size_t>(h.bitpix)) {
    return InvalidArgument(std::string("voxels of type ") + DTypeName(dtype) + " do not match the header's bitpix " +
                           std::to_string(h.bitpix));
  }
  if (size != voxel_bytes) {
    return InvalidArgument("the header describes " + std::to_string(voxel_bytes) + " voxel bytes, the array has " +
                           std::to_string(size));
  }
  std::vector<uint8_t> head = header;
  if (!h.single_file) {  // a .hdr/.img pair header: make it describe one file
    h.single_file = true;
    h.vox_offset = h.version == 1 ? 352 : 544;
    head = media::BuildNiftiHeader(h, header);
  }
  const auto vox_offset = static_cast<size_t>(media::VoxOffsetBytes(h));
  std::vector<uint8_t> out(vox_offset + size, 0);
  std::memcpy(out.data(), head.data(), head.size());
  uint8_t* dst = out.data() + vox_offset;
  std::memcpy(dst, voxels, size);
  if (h.big_endian) media::SwapElementBytes(dst, size, es);
  return out;
}

namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

Result<std::vector<uint8_t>> Gzip(const std::vector<uint8_t>& in) {
  z_stream z{};
  if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return Internal("zlib deflateInit2 failed");
  }
  std::vector<uint8_t> out(deflateBound(&z, in.size()) + 64);
  z.next_in = const_cast<Bytef*>(in.data());
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) return Internal("zlib deflate failed");
  return out;
}

}  // namespace

Status WriteMaybeGzipped(const std::string& path, const std::vector<uint8_t>& image) {
  if (image.size() > (uint64_t(1) << 32) - 1024) return Unsupported(path + ": over 4 GiB");
  std::vector<uint8_t> gz;
  const std::vector<uint8_t>* bytes = &image;
  if (EndsWith(path, ".gz")) {
    ASSIGN_OR_RETURN(gz, Gzip(image));
    bytes = &gz;
  }
  const std::string tmp = path + ".tmp";
  {
    std::unique_ptr<std::FILE, FileCloser> f(std::fopen(tmp.c_str(), "wb"));
    if (!f) return IOError(tmp + ": cannot create: " + std::strerror(errno));
    if (std::fwrite(bytes->data(), 1, bytes->size(), f.get()) != bytes->size() || std::fflush(f.get()) != 0) {
      std::remove(tmp.c_str());
      return IOError(tmp + ": write failed: " + std::strerror(errno));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return IOError(path + ": rename failed: " + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace shardify::tools
