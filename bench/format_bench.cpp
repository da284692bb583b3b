// Format benchmark: write MB/s, random-access decode (verify on/off) against bare
// ZSTD_decompress and memcpy over the same blobs, dictionary effect, and the time to open
// a 1,000,000-sample dataset. Prints figures; asserts nothing.
//
// Usage: format_bench [--dir DIR] [--quick]
#include <zstd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "base/file.h"
#include "convert/decode/idx.h"
#include "format/dataset.h"
#include "format/writer.h"

using namespace shardify;
using Clock = std::chrono::steady_clock;
using Bytes = std::vector<uint8_t>;

namespace {

double Seconds(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void Die(const Status& s) {
  std::fprintf(stderr, "format_bench: %s\n", s.ToString().c_str());
  std::exit(2);
}

// Fashion-MNIST images from Debian's dataset-fashion-mnist when installed, else synthetic.
std::vector<Bytes> LoadImages28(size_t n) {
  std::vector<Bytes> out;
  const Result<convert::IdxArray> idx =
      convert::ReadIdx("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz");
  if (idx.ok() && idx->dtype == DType::kU8 && idx->shape.size() == 3 && idx->shape[1] * idx->shape[2] == 784) {
    for (size_t at = 0; out.size() < n && at + 784 <= idx->data.size(); at += 784) {
      out.emplace_back(idx->data.begin() + at, idx->data.begin() + at + 784);
    }
  }
  uint64_t x = 1;
  while (out.size() < n) {
    Bytes img(784);
    for (size_t i = 0; i < img.size(); ++i) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      img[i] = static_cast<uint8_t>(((i % 28) * (i / 28) + out.size()) % 200 + (x >> 62));
    }
    out.push_back(img);
  }
  return out;
}

// A smooth 256x256 u16 image: a 28x28 image upsampled bilinearly and scaled to 12 bits.
Bytes Upsample16(const Bytes& small) {
  Bytes out(256 * 256 * 2);
  for (int y = 0; y < 256; ++y)
    for (int x = 0; x < 256; ++x) {
      const double fy = y * 27.0 / 255, fx = x * 27.0 / 255;
      const int y0 = static_cast<int>(fy), x0 = static_cast<int>(fx);
      const int y1 = std::min(y0 + 1, 27), x1 = std::min(x0 + 1, 27);
      const double wy = fy - y0, wx = fx - x0;
      const double v = (1 - wy) * ((1 - wx) * small[y0 * 28 + x0] + wx * small[y0 * 28 + x1]) +
                       wy * ((1 - wx) * small[y1 * 28 + x0] + wx * small[y1 * 28 + x1]);
      const auto u = static_cast<uint16_t>(v * 16.0);
      std::memcpy(&out[(y * 256 + x) * 2], &u, 2);
    }
  return out;
}

struct WriteResult {
  double seconds = 0;
  uint64_t raw = 0, stored = 0;
};

WriteResult WriteDataset(const std::string& dir, const std::vector<Bytes>& images, Shape shape, DType t, bool dict) {
  std::filesystem::remove_all(dir);
  WriterOptions o;
  o.fsync = false;
  std::vector<FieldSpec> fields = {{"image", FieldKind::kNdarray, t, shape, {}, {}},
                                   {"label", FieldKind::kInt, DType::kU8, {}, {}, {}}};
  auto w = DatasetWriter::Create(dir, fields, o);
  if (!w.ok()) Die(w.status());
  const auto t0 = Clock::now();
  if (dict) {
    std::vector<Bytes> sample(images.begin(), images.begin() + std::min<size_t>(images.size(), 2000));
    Status s = (*w)->TrainDictionary("image", sample, 32 << 10);
    if (!s.ok()) Die(s);
  }
  WriteResult r;
  for (size_t i = 0; i < images.size(); ++i) {
    SampleInput s;
    s.values = {FieldValue::Array(images[i], shape), FieldValue::Int(static_cast<int64_t>(i % 10))};
    r.raw += images[i].size();
    Status st = (*w)->Append(std::move(s));
    if (!st.ok()) Die(st);
  }
  Status st = (*w)->Finish();
  if (!st.ok()) Die(st);
  r.seconds = Seconds(t0);
  r.stored = (*w)->bytes_written();
  return r;
}

std::vector<uint64_t> Permutation(uint64_t n, uint64_t seed) {
  std::vector<uint64_t> p(n);
  for (uint64_t i = 0; i < n; ++i) p[i] = i;
  uint64_t x = seed;
  for (uint64_t i = n; i > 1; --i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    std::swap(p[i - 1], p[(x >> 33) % i]);
  }
  return p;
}

struct DecodeResult {
  double samples_per_s = 0, gb_per_s = 0;
};

DecodeResult Report(uint64_t samples, uint64_t bytes, double secs) { return {samples / secs, bytes / secs / 1e9}; }

DecodeResult DecodeThroughDataset(const std::string& dir, bool verify, int rounds) {
  ReadOptions ro;
  ro.verify_checksums = verify;
  auto ds = Dataset::Open(dir, ro);
  if (!ds.ok()) Die(ds.status());
  const auto perm = Permutation((*ds)->num_samples(), 42);
  Decoder d;
  Bytes buf((*ds)->Sample(0)->blob(0)->raw_size);
  uint64_t bytes = 0;
  const auto t0 = Clock::now();
  for (int r = 0; r < rounds; ++r)
    for (uint64_t i : perm) {
      auto v = (*ds)->Sample(i);
      Status s = v->Decode(0, buf.data(), buf.size(), d);
      if (!s.ok()) Die(s);
      bytes += buf.size();
    }
  return Report(perm.size() * rounds, bytes, Seconds(t0));
}

// The ceiling: the same stored blobs, already in memory, through ZSTD_decompressDCtx / memcpy.
std::pair<DecodeResult, DecodeResult> DecodeBare(const std::string& dir, int rounds) {
  auto ds = Dataset::Open(dir);
  if (!ds.ok()) Die(ds.status());
  const auto perm = Permutation((*ds)->num_samples(), 42);
  std::vector<SampleView> views;
  for (uint64_t i = 0; i < (*ds)->num_samples(); ++i) views.push_back(*(*ds)->Sample(i));
  std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> context(ZSTD_createDCtx(), ZSTD_freeDCtx);
  if (!context) Die(ResourceExhausted("cannot create a zstd context"));
  ZSTD_DCtx* dctx = context.get();
  const BlobInfo first = *views[0].blob(0);
  Bytes buf(first.raw_size);
  uint64_t bytes = 0;
  auto t0 = Clock::now();
  for (int r = 0; r < rounds; ++r)
    for (uint64_t i : perm) {
      const BlobInfo b = *views[i].blob(0);
      if (b.codec == Codec::kZstd)
        ZSTD_decompressDCtx(dctx, buf.data(), buf.size(), b.data, b.stored_size);
      else
        std::memcpy(buf.data(), b.data, b.raw_size);
      bytes += buf.size();
    }
  const DecodeResult zstd = Report(perm.size() * rounds, bytes, Seconds(t0));
  Bytes raw(first.raw_size * std::min<size_t>(views.size(), 4096));
  bytes = 0;
  t0 = Clock::now();
  for (int r = 0; r < rounds; ++r)
    for (uint64_t i : perm) {
      std::memcpy(buf.data(), raw.data() + (i % 4096) * first.raw_size, first.raw_size);
      bytes += buf.size();
    }
  const DecodeResult copy = Report(perm.size() * rounds, bytes, Seconds(t0));
  return {zstd, copy};
}

void BenchImages(const std::string& name, const std::string& dir, const std::vector<Bytes>& images, Shape shape,
                 DType t, int rounds) {
  const WriteResult w = WriteDataset(dir, images, shape, t, false);
  std::printf("\n%s: %zu samples, raw %.1f MB, stored %.1f MB (%.2fx)\n", name.c_str(), images.size(), w.raw / 1e6,
              w.stored / 1e6, double(w.raw) / w.stored);
  std::printf("  write                     %10.1f MB/s raw   %10.0f samples/s\n", w.raw / w.seconds / 1e6,
              images.size() / w.seconds);
  const auto on = DecodeThroughDataset(dir, true, rounds);
  const auto off = DecodeThroughDataset(dir, false, rounds);
  const auto bare = DecodeBare(dir, rounds);
  std::printf("  decode, verify on         %10.0f samples/s %8.2f GB/s\n", on.samples_per_s, on.gb_per_s);
  std::printf("  decode, verify off        %10.0f samples/s %8.2f GB/s\n", off.samples_per_s, off.gb_per_s);
  std::printf("  bare ZSTD_decompressDCtx  %10.0f samples/s %8.2f GB/s\n", bare.first.samples_per_s,
              bare.first.gb_per_s);
  std::printf("  bare memcpy               %10.0f samples/s %8.2f GB/s\n", bare.second.samples_per_s,
              bare.second.gb_per_s);
  std::printf("  decode / bare zstd: verify on %.0f%%, verify off %.0f%% (target >= 80%%)\n",
              100 * on.samples_per_s / bare.first.samples_per_s, 100 * off.samples_per_s / bare.first.samples_per_s);
}

void BenchDictionary(const std::string& dir, const std::vector<Bytes>& images) {
  const WriteResult plain = WriteDataset(dir + "-plain", images, {1, 28, 28}, DType::kU8, false);
  const WriteResult dict = WriteDataset(dir + "-dict", images, {1, 28, 28}, DType::kU8, true);
  const auto a = DecodeThroughDataset(dir + "-plain", true, 1);
  const auto b = DecodeThroughDataset(dir + "-dict", true, 1);
  std::printf(
      "\ndictionary (28x28 u8, 32 KiB dictionary): stored %.1f MB without, %.1f MB with (%.1f%% smaller);"
      " decode %.0f vs %.0f samples/s\n",
      plain.stored / 1e6, dict.stored / 1e6, 100.0 * (1 - double(dict.stored) / plain.stored), a.samples_per_s,
      b.samples_per_s);
}

void BenchOpen(const std::string& dir, uint64_t n) {
  std::filesystem::remove_all(dir);
  WriterOptions o;
  o.fsync = false;
  o.compute_stats = false;
  o.target_shard_bytes = 64 << 20;
  auto w = DatasetWriter::Create(
      dir, {{"x", FieldKind::kNdarray, DType::kU8, {16}, {}, {}}, {"label", FieldKind::kInt, DType::kU8, {}, {}, {}}},
      o);
  if (!w.ok()) Die(w.status());
  for (uint64_t i = 0; i < n; ++i) {
    SampleInput s;
    s.values = {FieldValue::Array(Bytes(16, static_cast<uint8_t>(i)), {16}), FieldValue::Int(int64_t(i % 10))};
    Status st = (*w)->Append(std::move(s));
    if (!st.ok()) Die(st);
  }
  if (Status st = (*w)->Finish(); !st.ok()) Die(st);
  auto t0 = Clock::now();
  auto ds = Dataset::Open(dir);
  const double open_s = Seconds(t0);
  if (!ds.ok()) Die(ds.status());
  t0 = Clock::now();
  auto v = (*ds)->Sample(n - 1);
  const double first_s = Seconds(t0);
  t0 = Clock::now();
  for (size_t s = 0; s < (*ds)->manifest().shards.size(); ++s)
    if (Status st = (*ds)->CheckShard(s); !st.ok()) Die(st);
  const double all_s = Seconds(t0);
  std::printf(
      "\nopen a %llu-sample dataset (%zu shards): Open %.2f ms (target < 100 ms); first sample %.2f ms;"
      " map+check every shard index %.1f ms\n",
      static_cast<unsigned long long>(n), (*ds)->manifest().shards.size(), open_s * 1e3, first_s * 1e3, all_s * 1e3);
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = (std::filesystem::temp_directory_path() / "shardify-format-bench").string();
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--dir") && i + 1 < argc)
      dir = argv[++i];
    else if (!std::strcmp(argv[i], "--quick"))
      quick = true;
    else {
      std::fprintf(stderr, "usage: format_bench [--dir DIR] [--quick]\n");
      return 2;
    }
  }
  const size_t n28 = quick ? 10000 : 60000, n256 = quick ? 500 : 2000;
  const std::vector<Bytes> small = LoadImages28(n28);
  std::vector<Bytes> large;
  for (size_t i = 0; i < n256; ++i) large.push_back(Upsample16(small[i]));
  std::printf("format_bench: single thread, zstd level 3, random order\n");
  BenchImages("28x28 u8", dir + "/u8", small, {1, 28, 28}, DType::kU8, quick ? 1 : 3);
  BenchImages("256x256 u16", dir + "/u16", large, {1, 256, 256}, DType::kU16, quick ? 1 : 3);
  BenchDictionary(dir + "/dict", small);
  BenchOpen(dir + "/open", quick ? 100000 : 1000000);
  std::filesystem::remove_all(dir);
  return 0;
}
