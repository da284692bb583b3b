// Patch benchmark: random 128^3 patches from a 300x512x512 volume (u16 and f32) stored
// chunked, against decoding the whole volume from the same shards and (when built with
// ITK) against reading the .nii.gz with ITK. Also compares stored bytes with the .nii.gz.
// Prints figures; asserts nothing. Usage: patch_bench [--dir DIR] [--quick] [--no-shuffle]
// [--level N] [--keep] (defaults: byte-shuffled, zstd level 3, as shardify writes volumes;
// --keep leaves the datasets in DIR).
#include <zlib.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "base/file.h"
#include "format/chunking.h"
#include "format/dataset.h"
#include "format/writer.h"
#include "media/nifti.h"

#ifdef SHARDIFY_BENCH_ITK
#include <itkImage.h>
#include <itkImageFileReader.h>
#include <itkNiftiImageIO.h>
#endif

using namespace shardify;
using Clock = std::chrono::steady_clock;

namespace {

double Seconds(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void Die(const Status& s) {
  std::fprintf(stderr, "patch_bench: %s\n", s.ToString().c_str());
  std::exit(2);
}

// A CT-like phantom: air, an elliptic body of soft tissue with noise, and a denser spine.
template <typename T>
std::vector<uint8_t> Phantom(int64_t d, int64_t h, int64_t w) {
  std::vector<uint8_t> out(static_cast<size_t>(d * h * w) * sizeof(T));
  uint64_t x = 12345;
  size_t n = 0;
  for (int64_t z = 0; z < d; ++z)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t c = 0; c < w; ++c, ++n) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        const double ny = (y - h / 2.0) / (h * 0.4), nx = (c - w / 2.0) / (w * 0.45);
        const double r = ny * ny + nx * nx;
        double v = 0;
        if (r < 1) v = 1000 + 40 * std::sin(z * 0.05 + y * 0.03) + static_cast<double>(x >> 59);
        const double sy = (y - h * 0.7) / (h * 0.08), sx = (c - w / 2.0) / (w * 0.06);
        if (sy * sy + sx * sx < 1) v = 1800 + static_cast<double>(x >> 58);
        const T t = static_cast<T>(v);
        std::memcpy(&out[n * sizeof(T)], &t, sizeof(T));
      }
  return out;
}

// A .nii.gz of a [D, H, W] volume with 0.8 mm voxels (the header from media/nifti.h).
Status WriteNiftiGz(const std::string& path, const std::vector<uint8_t>& voxels, DType t, int64_t d, int64_t h,
                    int64_t w) {
  ASSIGN_OR_RETURN(const std::vector<uint8_t> hdr, media::MakeNifti1Header({1, d, h, w}, t, {0.8, 0.8, 0.8}, {}, {}));
  gzFile f = gzopen(path.c_str(), "wb6");
  if (f == nullptr) return IOError("cannot write " + path);
  bool ok = gzwrite(f, hdr.data(), static_cast<unsigned>(hdr.size())) == static_cast<int>(hdr.size());
  for (size_t o = 0; ok && o < voxels.size(); o += 1 << 24) {
    const auto n = static_cast<unsigned>(std::min<size_t>(1 << 24, voxels.size() - o));
    ok = gzwrite(f, voxels.data() + o, n) == static_cast<int>(n);
  }
  if (gzclose(f) != Z_OK || !ok) return IOError("cannot write " + path);
  return Status::Ok();
}

struct Config {
  bool shuffle = true;  // byte-shuffle the stored volume, as shardify does by default
  int level = 3;        // zstd level, as shardify's auto level for large samples
};

template <typename T>
void Bench(const char* name, DType t, const std::string& dir, int64_t d, int64_t h, int64_t w, int patches,
           const Config& config) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const Shape shape = {1, d, h, w}, patch = {1, 128, 128, 128};
  const std::vector<uint8_t> vol = Phantom<T>(d, h, w);
  const std::string nii = dir + "/volume.nii.gz";
  auto t0 = Clock::now();
  if (Status s = WriteNiftiGz(nii, vol, t, d, h, w); !s.ok()) Die(s);
  const double gz_s = Seconds(t0);
  FieldSpec f{"image", FieldKind::kNdarray, t, {1, -1, -1, -1}, {}, {}};
  f.chunk_shape = ChooseChunkShape(shape, patch, sizeof(T));
  if (config.shuffle) f.filter = Filter::kByteShuffle;
  WriterOptions o;
  o.fsync = false;
  o.level = config.level;
  auto wr = DatasetWriter::Create(dir + "/shards", {f}, o);
  if (!wr.ok()) Die(wr.status());
  SampleInput s;
  s.values = {FieldValue::Array(vol, shape)};
  t0 = Clock::now();
  if (Status st = (*wr)->Append(std::move(s)); !st.ok()) Die(st);
  if (Status st = (*wr)->Finish(); !st.ok()) Die(st);
  const double write_s = Seconds(t0);
  const uint64_t stored = (*wr)->bytes_written(), gz = *FileSize(nii);
  std::printf("\n%s volume %lldx%lldx%lld (%.0f MB raw), chunks %s\n", name, (long long)d, (long long)h, (long long)w,
              vol.size() / 1e6, ShapeToString(f.chunk_shape).c_str());
  std::printf("  stored %.1f MB in shards (written in %.1f s) vs %.1f MB .nii.gz (gzip -6, %.1f s): %.2fx\n",
              stored / 1e6, write_s, gz / 1e6, gz_s, double(stored) / gz);
  auto ds = Dataset::Open(dir + "/shards");
  if (!ds.ok()) Die(ds.status());
  auto v = (*ds)->Sample(0);
  Decoder dec;
  std::vector<uint8_t> whole(vol.size()), out(128 * 128 * 128 * sizeof(T));
  t0 = Clock::now();
  const int rounds = 3;
  for (int r = 0; r < rounds; ++r)
    if (Status st = v->Decode(0, whole.data(), whole.size(), dec); !st.ok()) Die(st);
  const double full = rounds / Seconds(t0);
  uint64_t x = 7;
  const uint64_t before = dec.chunks_decoded();
  t0 = Clock::now();
  for (int p = 0; p < patches; ++p) {
    Shape start = {0, 0, 0, 0};
    for (int a = 1; a < 4; ++a) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      start[a] = static_cast<int64_t>((x >> 33) % static_cast<uint64_t>(shape[a] - 128 + 1));
    }
    if (Status st = v->DecodeRegion(0, start, patch, out.data(), out.size(), dec); !st.ok()) Die(st);
  }
  const double pps = patches / Seconds(t0);
  std::printf("  random 128^3 patches    %8.1f patches/s  (%.1f chunks each)\n", pps,
              double(dec.chunks_decoded() - before) / patches);
  std::printf("  whole volume, shards    %8.2f volumes/s  -> patches are %.1fx faster (target >= 20x)\n", full,
              pps / full);
#ifdef SHARDIFY_BENCH_ITK
  using Image = itk::Image<T, 3>;
  t0 = Clock::now();
  auto reader = itk::ImageFileReader<Image>::New();
  reader->SetImageIO(itk::NiftiImageIO::New());
  reader->SetFileName(nii);
  reader->Update();
  const double itk_s = Seconds(t0);
  std::printf("  whole volume, ITK .nii.gz %6.2f volumes/s -> patches are %.1fx faster\n", 1 / itk_s, pps * itk_s);
#endif
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = (std::filesystem::temp_directory_path() / "shardify-patch-bench").string();
  bool quick = false, keep = false;
  Config config;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--dir") && i + 1 < argc)
      dir = argv[++i];
    else if (!std::strcmp(argv[i], "--quick"))
      quick = true;
    else if (!std::strcmp(argv[i], "--no-shuffle"))
      config.shuffle = false;
    else if (!std::strcmp(argv[i], "--keep"))
      keep = true;
    else if (!std::strcmp(argv[i], "--level") && i + 1 < argc)
      config.level = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: patch_bench [--dir DIR] [--quick] [--no-shuffle] [--level 1..19] [--keep]\n");
      return 2;
    }
  }
  const int64_t d = quick ? 160 : 300, hw = quick ? 256 : 512;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::printf("patch_bench: single thread, zstd level %d, %s\n", config.level,
              config.shuffle ? "byte-shuffled" : "not shuffled");
  Bench<uint16_t>("u16", DType::kU16, dir + "/u16", d, hw, hw, quick ? 20 : 100, config);
  Bench<float>("f32", DType::kF32, dir + "/f32", d, hw, hw, quick ? 20 : 100, config);
  if (!keep) std::filesystem::remove_all(dir);  // --keep: DIR/{u16,f32}/shards for shardtool bench
  return 0;
}
