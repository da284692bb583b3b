// nnU-Net's augmentation on the host without LibTorch: ApplySample's errors, and a plan
// that picks nothing crops the margin off exactly, turning the labels outside the labelled
// data into 0 or the ignore label (tests/trainer/augment_host_test.cpp holds the rest to
// the device path).
#include "reader/augment.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

using namespace shardify;

namespace {

NnUnetAugment Make(std::vector<int64_t> patch, const std::string& p, const NnUnetAugmentOptions& base = {}) {
  NnUnetAugmentOptions o = base;
  REQUIRE(ParseAugProbabilities(p, &o).ok());
  auto a = NnUnetAugment::Create(std::move(patch), o);
  REQUIRE(a.ok());
  return std::move(a).value();
}

int64_t Voxels(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

// Input sizes of `aug`: the patch and its margin.
std::vector<int64_t> InputSizes(const NnUnetAugment& aug) {
  std::vector<int64_t> in = aug.patch();
  for (size_t a = 0; a < in.size(); ++a) in[a] += 2 * aug.margin()[a];
  return in;
}

// Element p (array axes) of a row-major array of `sizes`.
int64_t At(const std::vector<int64_t>& sizes, const std::vector<int64_t>& p) {
  int64_t i = 0;
  for (size_t a = 0; a < sizes.size(); ++a) i = i * sizes[a] + p[a];
  return i;
}

// Checks that out (channels of `patch`) is the centre of in (channels of `in_sizes`),
// `margin` a side, with `fix` applied to each value of that centre.
template <class T, class Fix>
void CheckCentre(const std::vector<T>& in, const std::vector<T>& out, int64_t channels,
                 const std::vector<int64_t>& in_sizes, const std::vector<int64_t>& patch,
                 const std::vector<int64_t>& margin, Fix&& fix) {
  const int64_t n = Voxels(patch);
  int64_t wrong = 0;
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t v = 0; v < n; ++v) {
      std::vector<int64_t> p(patch.size());
      for (size_t a = patch.size(), rest = size_t(v); a-- > 0;) {
        p[a] = int64_t(rest % size_t(patch[a])) + margin[a];
        rest /= size_t(patch[a]);
      }
      const T want = fix(in[size_t(c * Voxels(in_sizes) + At(in_sizes, p))], c, v);
      wrong += out[size_t(c * n + v)] != want;
    }
  }
  CHECK(wrong == 0);
}

}  // namespace

TEST_CASE("augment: a plan that picks nothing crops the margin off, outside labels become 0 or the ignore label") {
  for (const std::vector<int64_t>& patch : {std::vector<int64_t>{6, 8, 5}, std::vector<int64_t>{9, 7}}) {
    for (const int64_t label_pad : {int64_t{-1}, int64_t{255}}) {
      NnUnetAugmentOptions o;
      o.label_pad = label_pad;
      if (label_pad == 255) {
        o.ignore_label = 9;
        o.mask_image_channels = std::vector<int64_t>{1};
      }
      const NnUnetAugment aug = Make(patch, "all=0,rotate=1", o);  // rotation possible: a margin
      REQUIRE(aug.margin()[0] > 0);
      const AugmentPlan plan = Make(patch, "all=0").Draw(3, 2, 4, 5);  // picks nothing
      const std::vector<int64_t> in_sizes = InputSizes(aug);
      const int64_t in_n = Voxels(in_sizes), n = Voxels(patch);
      std::vector<float> image(size_t(2 * in_n)), out(size_t(2 * n), -99);
      std::vector<int32_t> mask(static_cast<size_t>(in_n)), out_mask(static_cast<size_t>(n), -99);
      for (size_t i = 0; i < image.size(); ++i) image[i] = float(i % 97) * 0.37f - 11;
      for (size_t i = 0; i < mask.size(); ++i) mask[i] = i % 11 == 0 ? int32_t(label_pad) : int32_t(i % 5) - 1;
      REQUIRE(aug.ApplySample(plan, 1, 2, image.data(), mask.data(), out.data(), out_mask.data()).ok());
      INFO("rank " << patch.size() << ", label_pad " << label_pad);
      auto outside = [&](int32_t label) { return label < 0 || label == label_pad; };
      CheckCentre(mask, out_mask, 1, in_sizes, patch, aug.margin(), [&](int32_t label, int64_t, int64_t) {
        return outside(label) ? int32_t(o.ignore_label.value_or(0)) : label;
      });
      CheckCentre(image, out, 2, in_sizes, patch, aug.margin(), [&](float x, int64_t c, int64_t v) {
        return c == 1 && label_pad == 255 && out_mask[size_t(v)] == 9 ? 0.0f : x;
      });
      // Without a mask, the image alone; the same plan on another sample gives the same.
      std::vector<float> alone(out.size());
      REQUIRE(aug.ApplySample(plan, 2, 2, image.data(), nullptr, alone.data(), nullptr).ok());
      CheckCentre(image, alone, 2, in_sizes, patch, aug.margin(), [](float x, int64_t, int64_t) { return x; });
    }
  }
}

TEST_CASE("augment: ApplySample rejects a sample, channel count or plan that do not match") {
  NnUnetAugmentOptions o;
  o.mask_image_channels = std::vector<int64_t>{2};
  const NnUnetAugment aug = Make({4, 5}, "all=1", o);
  const AugmentPlan plan = aug.Draw(2, 2, 0, 0);
  const std::vector<int64_t> in_sizes = InputSizes(aug);
  std::vector<float> image(size_t(3 * Voxels(in_sizes))), out(size_t(3 * 20));
  std::vector<int32_t> mask(size_t(Voxels(in_sizes))), out_mask(20);
  auto apply = [&](const AugmentPlan& p, int64_t b, int64_t channels, const int32_t* m, int32_t* mo) {
    return aug.ApplySample(p, b, channels, image.data(), m, out.data(), mo);
  };
  auto fails = [](const Status& s, const std::string& part) {
    INFO(s.ToString());
    CHECK(s.code() == StatusCode::kInvalidArgument);
    CHECK(s.ToString().find(part) != std::string::npos);
  };
  fails(apply(plan, 2, 2, nullptr, nullptr), "batch of 2");
  fails(apply(plan, -1, 2, nullptr, nullptr), "batch of 2");
  fails(apply(plan, 0, 3, nullptr, nullptr), "3 channels; the plan was drawn for 2");
  fails(apply(plan, 0, 2, mask.data(), out_mask.data()), "masked channel 2 of an image of 2");
  fails(apply(plan, 0, 2, mask.data(), nullptr), "buffer is null");
  AugmentPlan short_plan = plan;
  short_plan.gamma.pop_back();
  fails(apply(short_plan, 0, 2, nullptr, nullptr), "do not cover its batch");
  CHECK(apply(plan, 1, 2, nullptr, nullptr).ok());  // no mask: no masked channel to check
}
