// idx to class-folder PNGs (see idx2png.h).
#include "convert/programs/idx2png.h"

#include <cstdio>
#include <filesystem>
#include <mutex>

#include "base/file.h"
#include "convert/decode/idx.h"
#include "convert/decode/image_io.h"
#include "convert/pipeline/work_internal.h"

namespace fs = std::filesystem;

namespace shardify::convert {
namespace {

std::string FolderName(const IdxToPngOptions& o, int label) {
  if (label >= static_cast<int>(o.classes.size())) return std::to_string(label);
  std::string n = o.classes[static_cast<size_t>(label)];
  for (char& c : n)
    if (c == '/') c = '_';
  return n;
}

}  // namespace

Result<uint64_t> IdxToPng(const IdxToPngOptions& o) {
  ASSIGN_OR_RETURN(IdxArray images, ReadIdx(o.images));
  ASSIGN_OR_RETURN(IdxArray labels, ReadIdx(o.labels));
  const Shape& s = images.shape;
  if (images.dtype != DType::kU8 || (s.size() != 3 && s.size() != 4)) {
    return Unsupported(o.images + ": expected u8 images [N, H, W] or [N, H, W, C], got " + DTypeName(images.dtype) +
                       " " + ShapeToString(s));
  }
  if (labels.shape.size() != 1 || labels.shape[0] != s[0] || labels.dtype != DType::kU8) {
    return Corruption(o.labels + ": labels " + ShapeToString(labels.shape) + " do not match " + std::to_string(s[0]) +
                      " images");
  }
  const int64_t c = s.size() == 4 ? s[3] : 1, h = s[1], w = s[2];
  const uint64_t n =
      o.limit > 0 ? std::min<uint64_t>(o.limit, static_cast<uint64_t>(s[0])) : static_cast<uint64_t>(s[0]);
  for (uint64_t i = 0; i < n; ++i) {
    std::error_code ec;
    const std::string folder = JoinPath(o.out, FolderName(o, labels.data[i]));
    fs::create_directories(folder, ec);
    if (ec) return IOError(folder + ": cannot create: " + ec.message());
  }
  std::mutex mu;
  Status first;
  const size_t bytes = static_cast<size_t>(c * h * w);
  RETURN_IF_ERROR(detail::ParallelFor(n, o.threads, o.cancel, "idx2png", nullptr, [&](size_t i) {
    const uint8_t* p = images.data.data() + i * bytes;
    std::vector<uint8_t> planar(bytes);
    for (int64_t px = 0; px < h * w; ++px) {
      for (int64_t k = 0; k < c; ++k) planar[static_cast<size_t>(k * h * w + px)] = p[px * c + k];
    }
    char name[32];
    std::snprintf(name, sizeof name, "%05zu.png", i);
    const std::string path = JoinPath(JoinPath(o.out, FolderName(o, labels.data[i])), o.prefix + name);
    Status st = WriteImage2D(path, DType::kU8, {c, h, w}, planar);
    if (!st.ok()) {
      std::lock_guard<std::mutex> l(mu);
      if (first.ok()) first = st;
    }
  }));
  RETURN_IF_ERROR(first);
  return n;
}

}  // namespace shardify::convert
