// idx file reading (see idx.h).
#include "convert/decode/idx.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "convert/decode/gz_internal.h"
#include "media/nifti.h"  // SwapElementBytes

namespace shardify::convert {
namespace {

Result<DType> IdxType(uint8_t code, const std::string& path) {
  switch (code) {
    case 0x08:
      return DType::kU8;
    case 0x09:
      return DType::kI8;
    case 0x0B:
      return DType::kI16;
    case 0x0C:
      return DType::kI32;
    case 0x0D:
      return DType::kF32;
    case 0x0E:
      return DType::kF64;
    default:
      return Corruption(path + ": unknown idx type code " + std::to_string(code));
  }
}

// Reads up to n bytes; returns how many were read.
Result<uint64_t> ReadUpTo(gzFile_s* f, uint8_t* dst, uint64_t n, const std::string& path) {
  return detail::GzReadUpTo(f, dst, n, path, "idx data");
}

}  // namespace

Result<IdxArray> ReadIdx(const std::string& path, uint64_t max_bytes) {
  detail::GzFile f(gzopen(path.c_str(), "rb"));
  if (!f) return IOError(path + ": cannot open: " + std::strerror(errno));
  uint8_t head[4];
  ASSIGN_OR_RETURN(uint64_t got, ReadUpTo(f.get(), head, 4, path));
  if (got < 4 || head[0] != 0 || head[1] != 0) return Corruption(path + ": not an idx file (bad magic)");
  IdxArray out;
  ASSIGN_OR_RETURN(out.dtype, IdxType(head[2], path));
  const int rank = head[3];
  if (rank < 1 || rank > static_cast<int>(kMaxRank)) {
    return Corruption(path + ": idx rank " + std::to_string(rank) + " is out of range");
  }
  std::vector<uint8_t> dims(4 * static_cast<size_t>(rank));
  ASSIGN_OR_RETURN(got, ReadUpTo(f.get(), dims.data(), dims.size(), path));
  if (got < dims.size()) return Corruption(path + ": truncated idx header");
  for (int i = 0; i < rank; ++i) {
    const uint8_t* p = &dims[4 * static_cast<size_t>(i)];
    out.shape.push_back((int64_t{p[0]} << 24) | (int64_t{p[1]} << 16) | (int64_t{p[2]} << 8) | p[3]);
  }
  auto bytes = ByteSize(out.shape, out.dtype);
  if (!bytes.ok() || *bytes > max_bytes) {
    return ResourceExhausted(path + ": idx array " + ShapeToString(out.shape) + " is too large");
  }
  RETURN_IF_ERROR(detail::CheckFileCanHold(path, f.get(), 4 + dims.size(), *bytes, "idx data"));
  out.data.resize(*bytes);
  ASSIGN_OR_RETURN(got, ReadUpTo(f.get(), out.data.data(), *bytes, path));
  if (got < *bytes) {
    return Corruption(path + ": truncated idx data: expected " + std::to_string(*bytes) + " bytes, got " +
                      std::to_string(got));
  }
  uint8_t extra;
  ASSIGN_OR_RETURN(got, ReadUpTo(f.get(), &extra, 1, path));
  if (got != 0) return Corruption(path + ": idx file has bytes past the end of its data");
  media::SwapElementBytes(out.data.data(), out.data.size(), DTypeSize(out.dtype));
  return out;
}

bool IsIdxName(const std::string& name) {
  std::string n = name;
  if (n.size() > 3 && n.compare(n.size() - 3, 3, ".gz") == 0) n.resize(n.size() - 3);
  auto ends = [&](const char* s) {
    size_t k = std::strlen(s);
    return n.size() > k && n.compare(n.size() - k, k, s) == 0;
  };
  return ends("-images-idx3-ubyte") || ends("-labels-idx1-ubyte") || ends("-images.idx3-ubyte") ||
         ends("-labels.idx1-ubyte");
}

}  // namespace shardify::convert
