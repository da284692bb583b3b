// Fixtures for the converter tests (see convert_fixtures.h).
#include "tests/convert/convert_fixtures.h"

#include <itkNiftiImageIO.h>
#include <png.h>
#include <sys/wait.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

namespace fs = std::filesystem;

namespace shardify::convert::testing {

std::string ItkDataDir() { return "/usr/share/doc/insighttoolkit5-examples/examples/Data"; }

void MakeDirs(const std::string& dir) { fs::create_directories(dir); }

void WriteText(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::vector<uint8_t> Pixels(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>((i * 3 + seed * 17) % 200 + rng() % 8);
  return out;
}

std::vector<uint8_t> WritePng(const std::string& path, int c, int h, int w, uint32_t seed) {
  fs::create_directories(fs::path(path).parent_path());
  std::vector<uint8_t> px = Pixels(static_cast<size_t>(c * h * w), seed);
  Status s = WriteImage2D(path, DType::kU8, {c, h, w}, px);
  REQUIRE(s.ok());
  return px;
}

void DamageImageData(const std::string& png_path) {
  std::vector<uint8_t> png = ReadBytes(png_path);
  const char* idat = "IDAT";
  const auto at = std::search(png.begin(), png.end(), idat, idat + 4);
  REQUIRE(at != png.end());
  const size_t data = static_cast<size_t>(at - png.begin()) + 4;
  const size_t length =
      (size_t{png[data - 8]} << 24) | (size_t{png[data - 7]} << 16) | (size_t{png[data - 6]} << 8) | png[data - 5];
  REQUIRE(data + length <= png.size());
  png[data + length / 2] ^= 0x5A;
  WriteBytes(png_path, png);
}

void WriteRawPng(const std::string& path, int w, int h, int color_type, int bit_depth,
                 const std::vector<uint16_t>& values, bool trns) {
  fs::create_directories(fs::path(path).parent_path());
  FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  png_init_io(png, f);
  png_set_IHDR(png, info, static_cast<png_uint_32>(w), static_cast<png_uint_32>(h), bit_depth, color_type,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  const int channels = color_type == PNG_COLOR_TYPE_GRAY || color_type == PNG_COLOR_TYPE_PALETTE ? 1
                       : color_type == PNG_COLOR_TYPE_GRAY_ALPHA                                 ? 2
                       : color_type == PNG_COLOR_TYPE_RGB                                        ? 3
                                                                                                 : 4;
  if (color_type == PNG_COLOR_TYPE_PALETTE) {
    std::vector<png_color> pal(static_cast<size_t>(1 << bit_depth));
    for (size_t i = 0; i < pal.size(); ++i) {
      pal[i] = {static_cast<png_byte>(i * 10), static_cast<png_byte>(255 - i * 10), static_cast<png_byte>(i * 3)};
    }
    png_set_PLTE(png, info, pal.data(), static_cast<int>(pal.size()));
    if (trns) {
      std::vector<png_byte> alpha(pal.size());
      for (size_t i = 0; i < alpha.size(); ++i) alpha[i] = static_cast<png_byte>(255 - i);
      png_set_tRNS(png, info, alpha.data(), static_cast<int>(alpha.size()), nullptr);
    }
  }
  if (color_type == PNG_COLOR_TYPE_GRAY && trns) {
    png_color_16 transparent{};
    transparent.gray = 1;
    png_set_tRNS(png, info, nullptr, 0, &transparent);
  }
  png_write_info(png, info);
  const int per_row = w * channels;
  const size_t row_bytes = static_cast<size_t>((per_row * bit_depth + 7) / 8);
  for (int y = 0; y < h; ++y) {
    std::vector<png_byte> row(row_bytes, 0);
    for (int i = 0; i < per_row; ++i) {
      uint16_t v = values[static_cast<size_t>(y * per_row + i)];
      if (bit_depth == 16) {
        row[2 * i] = static_cast<png_byte>(v >> 8);
        row[2 * i + 1] = static_cast<png_byte>(v & 0xFF);
      } else {
        const int bit = i * bit_depth;
        row[bit / 8] = static_cast<png_byte>(row[bit / 8] | (v << (8 - bit_depth - bit % 8)));
      }
    }
    png_write_row(png, row.data());
  }
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  std::fclose(f);
}

Geometry TestGeometry(double shift) {
  const double c = std::cos(0.3), s = std::sin(0.3);
  Geometry g;
  g.spacing = {0.75, 1.25, 2.5};
  g.origin = {-10.5 + shift, 20.25, 3.0};
  g.direction = {c, -s, 0, s, c, 0, 0, 0, 1};
  return g;
}

void WriteLabels(const std::string& path, int d, int h, int w, uint32_t seed, int labels, const Geometry& g) {
  fs::create_directories(fs::path(path).parent_path());
  std::vector<uint8_t> px = Pixels(static_cast<size_t>(d * h * w), seed);
  for (uint8_t& v : px) v = static_cast<uint8_t>(v % labels);
  REQUIRE(WriteNifti(path, DType::kU8, {1, d, h, w}, px, g).ok());
}

void WriteVolume(const std::string& path, DType dtype, int d, int h, int w, uint32_t seed, const Geometry& g,
                 int channels) {
  fs::create_directories(fs::path(path).parent_path());
  const size_t n = static_cast<size_t>(channels * d * h * w) * DTypeSize(dtype);
  std::vector<uint8_t> px = Pixels(n, seed);
  if (dtype == DType::kF32 || dtype == DType::kF64) {  // finite floats
    for (size_t i = 0; i < n; i += DTypeSize(dtype)) {
      if (dtype == DType::kF32) {
        float v = static_cast<float>(px[i]) * 0.5f;
        std::memcpy(&px[i], &v, 4);
      } else {
        double v = px[i] * 0.25;
        std::memcpy(&px[i], &v, 8);
      }
    }
  }
  Status s = WriteNifti(path, dtype, {channels, d, h, w}, px, g);
  REQUIRE(s.ok());
}

std::string ManyPngs(const TempDir& dir, int n, int size) {
  for (int i = 0; i < n; ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "src/c%d/%04d.png", i % 3, i);
    WritePng(dir / name, 1 + (i % 7 == 0 ? 2 : 0), size + i % 3, size, static_cast<uint32_t>(i));
  }
  return dir / "src";
}

bool HasDatasetFiles(const std::string& dir) {
  if (!std::filesystem::exists(dir)) return false;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::string n = e.path().filename().string();
    if (n.rfind("shard-", 0) == 0 || n.rfind("manifest", 0) == 0) return true;
  }
  return false;
}

bool WaitForShard(const std::string& dir, pid_t pid) {
  for (int i = 0; i < 20000; ++i) {
    if (HasDatasetFiles(dir)) return true;
    int st;
    if (waitpid(pid, &st, WNOHANG) == pid) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  return false;
}

void CancelAt::OnProgress(const Progress& p) {
  if (std::strcmp(p.phase, "convert") == 0 && p.done >= at_) flag_->store(true);
  ++calls;
}

std::map<std::string, std::vector<uint8_t>> DirBytes(const std::string& dir) {
  std::map<std::string, std::vector<uint8_t>> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file()) out[e.path().filename().string()] = ReadBytes(e.path().string());
  }
  return out;
}

Result<ConvertSummary> RunConvert(const std::string& src, const std::string& dst, ConvertOptions o) {
  o.source = src;
  o.dest = dst;
  o.fsync = false;
  if (o.threads == 0) o.threads = 2;
  return Convert(o);
}

Readback Open(const std::string& dir) {
  auto ds = Dataset::Open(dir);
  INFO(ds.status().ToString());
  REQUIRE(ds.ok());
  Readback r;
  r.ds = std::move(ds).value();
  return r;
}

int Readback::Field(const std::string& name) const {
  int f = ds->manifest().FindField(name);
  INFO("field " << name);
  REQUIRE(f >= 0);
  return f;
}

std::vector<uint8_t> Readback::Array(uint64_t sample, const std::string& field) const {
  auto v = ds->Sample(sample);
  REQUIRE(v.ok());
  const size_t f = static_cast<size_t>(Field(field));
  auto b = v->blob(f);
  REQUIRE(b.ok());
  std::vector<uint8_t> out(b->raw_size);
  Decoder dec;
  Status s = v->Decode(f, out.data(), out.size(), dec);
  INFO(s.ToString());
  REQUIRE(s.ok());
  return out;
}

Shape Readback::ShapeOf(uint64_t sample, const std::string& field) const {
  auto v = ds->Sample(sample);
  REQUIRE(v.ok());
  auto s = v->shape(static_cast<size_t>(Field(field)));
  REQUIRE(s.ok());
  return *s;
}

int64_t Readback::Int(uint64_t sample, const std::string& field) const {
  auto v = ds->Sample(sample);
  REQUIRE(v.ok());
  auto i = v->int_value(static_cast<size_t>(Field(field)));
  REQUIRE(i.ok());
  return *i;
}

std::string Readback::Str(uint64_t sample, const std::string& field) const {
  auto v = ds->Sample(sample);
  REQUIRE(v.ok());
  auto s = v->bytes_value(static_cast<size_t>(Field(field)));
  REQUIRE(s.ok());
  return std::string(*s);
}

std::vector<double> Readback::Doubles(uint64_t sample, const std::string& field) const {
  std::vector<uint8_t> b = Array(sample, field);
  std::vector<double> out(b.size() / 8);
  std::memcpy(out.data(), b.data(), out.size() * 8);
  return out;
}

Geometry ItkGeometry(const std::string& path) {
  auto io = itk::NiftiImageIO::New();
  io->SetFileName(path);
  io->ReadImageInformation();
  Geometry g;
  for (unsigned i = 0; i < 3; ++i) {
    g.spacing.push_back(io->GetSpacing(i));
    g.origin.push_back(io->GetOrigin(i));
  }
  g.direction.assign(9, 0);
  for (unsigned c = 0; c < 3; ++c) {
    std::vector<double> col = io->GetDirection(c);
    for (unsigned r = 0; r < 3; ++r) g.direction[r * 3 + c] = col[r];
  }
  return g;
}

}  // namespace shardify::convert::testing

namespace shardify::convert::testing {

std::vector<uint8_t> ItkVoxels(const std::string& path) {
  auto io = itk::NiftiImageIO::New();
  io->SetFileName(path);
  io->ReadImageInformation();
  std::vector<uint8_t> out(io->GetImageSizeInBytes());
  itk::ImageIORegion region(io->GetNumberOfDimensions());
  for (unsigned i = 0; i < io->GetNumberOfDimensions(); ++i) {
    region.SetIndex(i, 0);
    region.SetSize(i, io->GetDimensions(i));
  }
  io->SetIORegion(region);
  io->Read(out.data());
  return out;
}

namespace {

void Swap(std::vector<uint8_t>& v, size_t off, size_t n) {
  for (size_t a = off, b = off + n - 1; a < b; ++a, --b) std::swap(v[a], v[b]);
}

int16_t I16(const std::vector<uint8_t>& v, size_t off) {
  int16_t x;
  std::memcpy(&x, &v[off], 2);
  return x;
}
float F32(const std::vector<uint8_t>& v, size_t off) {
  float x;
  std::memcpy(&x, &v[off], 4);
  return x;
}
template <typename T>
void Put(std::vector<uint8_t>& v, size_t off, T x) {
  std::memcpy(&v[off], &x, sizeof(T));
}

}  // namespace

std::vector<uint8_t> ToBigEndianNifti1(const std::vector<uint8_t>& le, size_t elem_size) {
  std::vector<uint8_t> v = le;
  const size_t vox = static_cast<size_t>(F32(le, 108));
  for (size_t off : {0, 32, 56, 60, 64, 108, 112, 116, 124, 128, 132, 136, 140, 144}) Swap(v, off, 4);
  for (size_t off = 76; off < 108; off += 4) Swap(v, off, 4);
  for (size_t off = 256; off < 328; off += 4) Swap(v, off, 4);
  for (size_t off = 40; off < 56; off += 2) Swap(v, off, 2);
  for (size_t off : {36, 68, 70, 72, 74, 120, 252, 254}) Swap(v, off, 2);
  for (size_t off = vox; elem_size > 1 && off + elem_size <= v.size(); off += elem_size) Swap(v, off, elem_size);
  return v;
}

std::vector<uint8_t> ToNifti2(const std::vector<uint8_t>& n1) {
  std::vector<uint8_t> h(544, 0);
  Put<int32_t>(h, 0, 540);
  std::memcpy(&h[4], "n+2\0\r\n\032\n", 8);
  Put<int16_t>(h, 12, I16(n1, 70));
  Put<int16_t>(h, 14, I16(n1, 72));
  for (size_t i = 0; i < 8; ++i) Put<int64_t>(h, 16 + 8 * i, I16(n1, 40 + 2 * i));
  for (size_t i = 0; i < 8; ++i) Put<double>(h, 104 + 8 * i, F32(n1, 76 + 4 * i));
  Put<int64_t>(h, 168, 544);
  Put<double>(h, 176, F32(n1, 112));
  Put<double>(h, 184, F32(n1, 116));
  Put<int32_t>(h, 344, I16(n1, 252));
  Put<int32_t>(h, 348, I16(n1, 254));
  for (size_t i = 0; i < 6; ++i) Put<double>(h, 352 + 8 * i, F32(n1, 256 + 4 * i));
  for (size_t i = 0; i < 12; ++i) Put<double>(h, 400 + 8 * i, F32(n1, 280 + 4 * i));
  Put<int32_t>(h, 500, n1[123]);
  const size_t vox = static_cast<size_t>(F32(n1, 108));
  const size_t data = n1.size() - vox;
  h.resize(544 + data);
  std::memcpy(h.data() + 544, n1.data() + vox, data);
  return h;
}

std::string ProvenanceOption(const Manifest& m, const std::string& key) {
  for (const auto& kv : m.provenance.options) {
    if (kv.key == key) return kv.value;
  }
  return "";
}

std::string FieldMeta(const FieldSpec& f, const std::string& key) {
  for (const auto& kv : f.meta) {
    if (kv.key == key) return kv.value;
  }
  return "";
}

std::string PreprocessingNotes(const ConvertSummary& s) {
  std::string all;
  for (const auto& p : s.preprocessing) all += p + "\n";
  return all;
}

bool Near(const std::vector<double>& a, const std::vector<double>& b, double tol) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::fabs(a[i] - b[i]) > tol * std::max(1.0, std::fabs(a[i]))) return false;
  }
  return true;
}

}  // namespace shardify::convert::testing
