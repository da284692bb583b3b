// The small datasets of the trainer tests.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "format/writer.h"
#include "mix.h"

namespace shardify::testing {

// The number of non-empty lines of a text file (metrics.jsonl, say); 0 when it is missing.
inline size_t CountLines(const std::string& path) {
  std::ifstream in(path);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) n += !line.empty();
  return n;
}

// Classes 0..3: quadrant `label` is bright over noise. Splits: train, val, test. With
// `unlabeled`, every training sample has label -1.
inline Status WriteClassFixture(const std::string& dir, bool rank2, uint64_t train = 192,
                                std::vector<std::string> classes = {"tl", "tr", "bl", "br"}, bool unlabeled = false) {
  const int64_t s = 12;
  Shape shape = rank2 ? Shape{s, s} : Shape{1, s, s};
  std::vector<FieldSpec> fields = {{"image", FieldKind::kNdarray, DType::kU8, shape, {}, {}},
                                   {"label", FieldKind::kInt, DType::kU8, {}, {}, {}}};
  WriterOptions wo;
  wo.classes = std::move(classes);
  wo.fsync = false;
  wo.target_shard_bytes = 8 << 10;
  ASSIGN_OR_RETURN(auto w, DatasetWriter::Create(dir, fields, wo));
  uint64_t x = 42;
  for (uint64_t i = 0; i < train + 96; ++i) {
    const int64_t label = int64_t(Mix(x) % 4);
    std::vector<uint8_t> px(size_t(s * s));
    for (int64_t r = 0; r < s; ++r) {
      for (int64_t c = 0; c < s; ++c) {
        const bool bright = (r < s / 2 ? 0 : 2) + (c < s / 2 ? 0 : 1) == label;
        px[size_t(r * s + c)] = uint8_t((bright ? 120 : 0) + Mix(x) % 100);
      }
    }
    SampleInput in;
    in.split = i < train ? "train" : i < train + 64 ? "val" : "test";
    in.values = {FieldValue::Array(std::move(px), shape), FieldValue::Int(unlabeled && i < train ? -1 : label)};
    RETURN_IF_ERROR(w->Append(std::move(in)));
  }
  return w->Finish();
}

// A bright rectangle labeled 1 on a dark background labeled 0.
inline Status WriteSegFixture(const std::string& dir) {
  const int64_t s = 16;
  std::vector<FieldSpec> fields = {
      {"image", FieldKind::kNdarray, DType::kU8, {1, s, s}, {}, {}},
      {"mask", FieldKind::kNdarray, DType::kU8, {1, s, s}, {}, {{"labels", "{\"background\": 0, \"box\": 1}"}}}};
  WriterOptions wo;
  wo.fsync = false;
  ASSIGN_OR_RETURN(auto w, DatasetWriter::Create(dir, fields, wo));
  uint64_t x = 7;
  for (uint64_t i = 0; i < 80; ++i) {
    std::vector<uint8_t> img(size_t(s * s)), mask(size_t(s * s));
    const int64_t r0 = int64_t(Mix(x) % 8), c0 = int64_t(Mix(x) % 8), r1 = r0 + 4 + int64_t(Mix(x) % 4),
                  c1 = c0 + 4 + int64_t(Mix(x) % 4);
    for (int64_t r = 0; r < s; ++r) {
      for (int64_t c = 0; c < s; ++c) {
        const bool in = r >= r0 && r < r1 && c >= c0 && c < c1;
        mask[size_t(r * s + c)] = in ? 1 : 0;
        img[size_t(r * s + c)] = uint8_t((in ? 140 : 20) + Mix(x) % 60);
      }
    }
    SampleInput in;
    in.split = i < 64 ? "train" : "val";
    in.values = {FieldValue::Array(std::move(img), {1, s, s}), FieldValue::Array(std::move(mask), {1, s, s})};
    RETURN_IF_ERROR(w->Append(std::move(in)));
  }
  return w->Finish();
}

// What `shardify --layout rle` writes: u16 slices of two sizes with 1.5 mm spacing and a
// u8 [3, H, W] mask of three overlapping organs (a disc, a bar across it, a box over
// both); each organ adds its own brightness, so every combination can be told apart.
inline Status WriteOrganFixture(const std::string& dir, uint64_t train = 48, uint64_t val = 16) {
  const std::string labels = R"({"large_bowel":0,"small_bowel":1,"stomach":2})";
  std::vector<FieldSpec> fields = {
      {"image", FieldKind::kNdarray, DType::kU16, {1, -1, -1}, {}, {{"role", "image"}}},
      {"mask",
       FieldKind::kNdarray,
       DType::kU8,
       {3, -1, -1},
       {},
       {{"role", "mask"}, {"labels", labels}, {"multi_label", "true"}}},
      {"label", FieldKind::kInt, DType::kI64, {}, {}, {{"role", "label"}}},
      {"path", FieldKind::kString, DType::kU8, {}, {}, {{"role", "path"}}},
      {"image.spacing", FieldKind::kNdarray, DType::kF64, {2}, {}, {{"role", "geometry"}}},
      {"image.origin", FieldKind::kNdarray, DType::kF64, {2}, {}, {{"role", "geometry"}}},
      {"image.direction", FieldKind::kNdarray, DType::kF64, {4}, {}, {{"role", "geometry"}}}};
  WriterOptions wo;
  wo.fsync = false;
  ASSIGN_OR_RETURN(auto w, DatasetWriter::Create(dir, fields, wo));
  auto doubles = [](std::vector<double> v) {
    std::vector<uint8_t> b(v.size() * 8);
    std::memcpy(b.data(), v.data(), b.size());
    return FieldValue::Array(std::move(b), {int64_t(v.size())});
  };
  uint64_t x = 11;
  for (uint64_t i = 0; i < train + val; ++i) {
    const int64_t h = i % 2 ? 24 : 20, wd = i % 2 ? 24 : 28;
    std::vector<uint8_t> mask(size_t(3 * h * wd), 0), img(size_t(h * wd) * 2);
    const int64_t cy = 6 + int64_t(Mix(x) % 8), cx = 6 + int64_t(Mix(x) % 10), r = 4 + int64_t(Mix(x) % 3);
    const int64_t bar = 4 + int64_t(Mix(x) % uint64_t(h - 8)), by = int64_t(Mix(x) % uint64_t(h - 8));
    const int64_t bx = int64_t(Mix(x) % uint64_t(wd - 10));
    for (int64_t y = 0; y < h; ++y) {
      for (int64_t c = 0; c < wd; ++c) {
        const size_t p = size_t(y * wd + c);
        const bool organs[3] = {(y - cy) * (y - cy) + (c - cx) * (c - cx) <= r * r, y >= bar && y < bar + 3,
                                y >= by && y < by + 7 && c >= bx && c < bx + 9};
        uint16_t v = uint16_t(1000 + Mix(x) % 400);
        for (size_t k = 0; k < 3; ++k) {
          mask[k * size_t(h * wd) + p] = organs[k];
          v = uint16_t(v + (organs[k] ? 1500u << k : 0u));
        }
        std::memcpy(&img[p * 2], &v, 2);
      }
    }
    SampleInput in;
    in.split = i < train ? "train" : "val";
    in.values = {FieldValue::Array(std::move(img), {1, h, wd}),
                 FieldValue::Array(std::move(mask), {3, h, wd}),
                 FieldValue::Int(-1),
                 FieldValue::String("case" + std::to_string(i / 4) + "_day1_slice_" + std::to_string(i)),
                 doubles({1.5, 1.5}),
                 doubles({0, 0}),
                 doubles({1, 0, 0, 1})};
    RETURN_IF_ERROR(w->Append(std::move(in)));
  }
  return w->Finish();
}

}  // namespace shardify::testing
