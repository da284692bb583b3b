// The small datasets of the trainer tests.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "format/writer.h"
#include "mix.h"

namespace shardify::testing {

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

}  // namespace shardify::testing
