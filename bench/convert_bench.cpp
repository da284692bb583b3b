// convert_bench: conversion speed against a decode-only loop with the same decoder, per
// thread and from 1 to 2 threads, and stored bytes against source bytes.
//
//   convert_bench [N] [WORKDIR]   N Fashion-MNIST-like PNGs (default 10000)
//
// Images come from Debian's dataset-fashion-mnist when installed (written as class-folder
// PNGs first), else from a synthetic pattern. The volume case converts a synthetic
// 160x160x96 int16 .nii.gz and the example volumes of insighttoolkit5-examples; the chunked
// case converts 4 such volumes with masks (nnU-Net layout) without and with --patch-size.
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "base/parallel.h"
#include "convert/convert.h"
#include "convert/decode/image_io.h"
#include "convert/programs/idx2png.h"

namespace fs = std::filesystem;
using namespace shardify;
using namespace shardify::convert;

namespace {

using Clock = std::chrono::steady_clock;
const char* kFashion = "/usr/share/datasets/fashion-mnist";
const char* kItkData = "/usr/share/doc/insighttoolkit5-examples/examples/Data";

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// CPU seconds (user + system) of this process so far, all threads.
double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// Wall-clock files/s and files per CPU-second of one measured run.
struct Speed {
  double wall = 0, per_cpu = 0;
};

double LoadAverage() {
  double l[1] = {0};
  return getloadavg(l, 1) == 1 ? l[0] : -1;
}

std::vector<std::string> ListImages(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

uint64_t DirBytes(const std::string& dir) {
  uint64_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) n += e.file_size();
  }
  return n;
}

// Decodes every file once with ReadImage on `threads` threads.
Speed DecodeOnly(const std::vector<std::string>& files, int threads) {
  std::atomic<bool> failed{false};
  auto t = Clock::now();
  const double cpu = CpuSeconds();
  ParallelFor(files.size(), static_cast<size_t>(threads), [&](size_t i, size_t) {
    if (!ReadImage(files[i]).ok()) failed = true;
  });
  if (failed) std::fprintf(stderr, "decode-only: some files failed to decode\n");
  const double n = static_cast<double>(files.size());
  return Speed{n / Since(t), n / (CpuSeconds() - cpu)};
}

Result<Speed> TimedConvert(const std::string& src, const std::string& dst, int threads, uint64_t* bytes_out);

Result<ConvertSummary> Run(const std::string& src, const std::string& dst, int threads, int level, bool dict) {
  ConvertOptions o;
  o.source = src;
  o.dest = dst;
  o.threads = threads;
  o.level = level;
  o.dict = dict;
  o.overwrite = true;
  o.fsync = false;
  return Convert(o);
}

Result<Speed> TimedConvert(const std::string& src, const std::string& dst, int threads, uint64_t* bytes_out) {
  const double cpu = CpuSeconds();
  ASSIGN_OR_RETURN(ConvertSummary s, Run(src, dst, threads, 3, false));
  *bytes_out = s.bytes_out;
  const double n = static_cast<double>(s.samples);
  return Speed{n / s.seconds, n / (CpuSeconds() - cpu)};
}

Status MakePngs(const std::string& dir, uint64_t n) {
  if (fs::exists(std::string(kFashion) + "/train-images-idx3-ubyte.gz")) {
    IdxToPngOptions o;
    o.images = std::string(kFashion) + "/train-images-idx3-ubyte.gz";
    o.labels = std::string(kFashion) + "/train-labels-idx1-ubyte.gz";
    o.out = dir;
    o.limit = n;
    o.threads = 2;
    return IdxToPng(o).status();
  }
  for (uint64_t i = 0; i < n; ++i) {
    std::vector<uint8_t> px(28 * 28);
    for (size_t p = 0; p < px.size(); ++p)
      px[p] = static_cast<uint8_t>(((p % 28) * (p / 28) + i) % 256 * ((p / 28) > 4));
    fs::create_directories(dir + "/" + std::to_string(i % 10));
    RETURN_IF_ERROR(WriteImage2D(dir + "/" + std::to_string(i % 10) + "/" + std::to_string(i) + ".png", DType::kU8,
                                 {1, 28, 28}, px));
  }
  return Status::Ok();
}

int PngBench(const std::string& work, uint64_t n) {
  const std::string src = work + "/png";
  fs::remove_all(src);
  Status s = MakePngs(src, n);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  std::vector<std::string> files = ListImages(src);
  const uint64_t src_bytes = DirBytes(src);
  std::printf("PNG 28x28 gray, %zu files, %.2f MiB of PNG\n", files.size(), src_bytes / 1048576.0);
  std::printf("  load average before: %.1f on %zu cores\n", LoadAverage(), CoreCount());
  DecodeOnly(files, 1);  // warm the page cache
  Speed d1 = DecodeOnly(files, 1), d2 = DecodeOnly(files, 2);
  uint64_t out1 = 0, out2 = 0;
  auto c1 = TimedConvert(src, work + "/out1", 1, &out1);
  auto c2 = TimedConvert(src, work + "/out2", 2, &out2);
  if (!c1.ok() || !c2.ok()) {
    std::fprintf(stderr, "convert failed: %s\n", (c1.ok() ? c2 : c1).status().ToString().c_str());
    return 1;
  }
  std::printf("  decode only:  1 thread %8.0f files/s   2 threads %8.0f files/s   %8.0f files per CPU-second\n",
              d1.wall, d2.wall, d1.per_cpu);
  std::printf("  conversion:   1 thread %8.0f files/s   2 threads %8.0f files/s   %8.0f files per CPU-second\n",
              c1->wall, c2->wall, c1->per_cpu);
  std::printf("  conversion / decode-only, per CPU-second: %.0f%%; wall, 1 thread: %.0f%%; wall, 2 threads: %.0f%%\n",
              100 * c1->per_cpu / d1.per_cpu, 100 * c1->wall / d1.wall, 100 * c2->wall / d2.wall);
  std::printf("  speed-up 1 -> 2 threads (wall): conversion %.2fx, decode only %.2fx\n", c2->wall / c1->wall,
              d2.wall / d1.wall);
  std::printf("  load average after: %.1f\n", LoadAverage());
  std::printf("  stored/source bytes: level 3 %.3f", static_cast<double>(out1) / src_bytes);
  for (auto [level, dict] : {std::pair<int, bool>{3, true}, {19, false}, {19, true}}) {
    auto c = Run(src, work + "/outx", 2, level, dict);
    if (c.ok())
      std::printf(", level %d%s %.3f", level, dict ? " + dict" : "", static_cast<double>(c->bytes_out) / src_bytes);
  }
  std::printf("\n");
  return 0;
}

constexpr int kD = 96, kH = 160, kW = 160;
const Geometry kPhantomGeometry{{0.8, 0.8, 1.5}, {-64, -64, -72}, {1, 0, 0, 0, 1, 0, 0, 0, 1}};

// A 96x160x160 ellipsoid phantom: int16 intensities, or u8 labels (1 inside, 2 in its core).
std::vector<uint8_t> Phantom(bool labels) {
  std::vector<uint8_t> px(static_cast<size_t>(kD * kH * kW) * (labels ? 1 : 2));
  for (int z = 0; z < kD; ++z) {
    for (int y = 0; y < kH; ++y) {
      for (int x = 0; x < kW; ++x) {
        const int dx = x - kW / 2, dy = y - kH / 2, dz = z - kD / 2;
        const int r2 = dx * dx + dy * dy + 2 * dz * dz;
        const size_t i = static_cast<size_t>(z) * kH * kW + static_cast<size_t>(y) * kW + static_cast<size_t>(x);
        if (labels) {
          px[i] = static_cast<uint8_t>(r2 < 400 ? 2 : r2 < 3600 ? 1 : 0);
        } else {
          const int16_t v = static_cast<int16_t>(r2 < 3600 ? 400 + (x * 7 + y * 3 + z) % 37 : -1000);
          std::memcpy(&px[2 * i], &v, 2);
        }
      }
    }
  }
  return px;
}

// nnU-Net layout of 4 phantom cases converted as whole blobs and with --patch-size.
int ChunkedBench(const std::string& work) {
  const std::string src = work + "/nnunet";
  fs::remove_all(src);
  fs::create_directories(src + "/imagesTr");
  fs::create_directories(src + "/labelsTr");
  std::FILE* f = std::fopen((src + "/dataset.json").c_str(), "w");
  if (f == nullptr) return 1;
  std::fputs(
      R"({"channel_names": {"0": "CT"}, "labels": {"background": 0, "organ": 1, "core": 2}, "file_ending": ".nii.gz"})",
      f);
  std::fclose(f);
  const std::vector<uint8_t> image = Phantom(false), mask = Phantom(true);
  for (int c = 0; c < 4; ++c) {
    const std::string name = "case_00" + std::to_string(c);
    Status s =
        WriteNifti(src + "/imagesTr/" + name + "_0000.nii.gz", DType::kI16, {1, kD, kH, kW}, image, kPhantomGeometry);
    if (s.ok())
      s = WriteNifti(src + "/labelsTr/" + name + ".nii.gz", DType::kU8, {1, kD, kH, kW}, mask, kPhantomGeometry);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
  }
  for (const Shape& patch : {Shape{}, Shape{64, 128, 128}}) {
    ConvertOptions o;
    o.source = src;
    o.dest = work + "/nnout";
    o.threads = 2;
    o.overwrite = true;
    o.fsync = false;
    o.patch_size = patch;
    auto c = Convert(o);
    if (!c.ok()) {
      std::fprintf(stderr, "%s\n", c.status().ToString().c_str());
      return 1;
    }
    std::printf("nnunet 4 x %dx%dx%d, patch %-11s %.2f s, stored %9llu B: %s\n", kD, kH, kW,
                patch.empty() ? "none" : ExtentsToString(patch).c_str(), c->seconds,
                static_cast<unsigned long long>(c->bytes_out), c->fields[0].c_str());
  }
  return 0;
}

int VolumeBench(const std::string& work) {
  const std::string src = work + "/vol";
  fs::remove_all(src);
  fs::create_directories(src);
  const std::vector<uint8_t> px = Phantom(false);
  Status s = WriteNifti(src + "/phantom.nii.gz", DType::kI16, {1, kD, kH, kW}, px, kPhantomGeometry);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  for (const char* f : {"KmeansTest_T1UCharRaw.nii.gz", "KmeansTest_T1RawSkullStrip.nii.gz"}) {
    std::error_code ec;
    fs::copy_file(std::string(kItkData) + "/" + f, src + "/" + f, ec);
  }
  for (const auto& file : ListImages(src)) {
    const std::string one = work + "/vol1";
    fs::remove_all(one);
    fs::create_directories(one);
    fs::copy_file(file, one + "/" + fs::path(file).filename().string());
    auto c = Run(one, work + "/volout", 2, 3, false);
    if (!c.ok()) {
      std::fprintf(stderr, "%s\n", c.status().ToString().c_str());
      return 1;
    }
    std::printf("volume %-38s source %9llu B, stored %9llu B, ratio %.3f\n", fs::path(file).filename().c_str(),
                static_cast<unsigned long long>(c->bytes_in), static_cast<unsigned long long>(c->bytes_out),
                static_cast<double>(c->bytes_out) / c->bytes_in);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t n = argc > 1 ? std::stoull(argv[1]) : 10000;
  const std::string work = argc > 2 ? argv[2] : (fs::temp_directory_path() / "shardify-convert-bench").string();
  fs::create_directories(work);
  int rc = PngBench(work, n);
  if (rc == 0) rc = VolumeBench(work);
  if (rc == 0) rc = ChunkedBench(work);
  fs::remove_all(work);
  return rc;
}
