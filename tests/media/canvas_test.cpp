#include "media/canvas.h"

#include <catch2/catch.hpp>

using namespace shardify::media;

namespace {
bool Same(Rgb a, Rgb b) { return a.r == b.r && a.g == b.g && a.b == b.b; }
constexpr Rgb kWhite{255, 255, 255}, kRed{200, 0, 0};
}  // namespace

TEST_CASE("media: text sets exactly its glyphs' pixels, upright or rotated") {
  Canvas c(40, 20, kWhite);
  c.Text(2, 3, "T1", kRed);
  const uint8_t* t = Glyph('T');
  const uint8_t* one = Glyph('1');
  for (int r = 0; r < kGlyphHeight; ++r) {
    for (int col = 0; col < kGlyphWidth; ++col) {
      CHECK(Same(c.At(2 + col, 3 + r), (t[r] & (0x10 >> col)) ? kRed : kWhite));
      CHECK(Same(c.At(2 + kGlyphAdvance + col, 3 + r), (one[r] & (0x10 >> col)) ? kRed : kWhite));
    }
  }
  Canvas v(20, 40, kWhite);
  v.Text(3, 30, "T", kRed, SIZE_MAX, /*vertical=*/true);  // read bottom to top
  for (int r = 0; r < kGlyphHeight; ++r) {
    for (int col = 0; col < kGlyphWidth; ++col)
      CHECK(Same(v.At(3 + r, 30 - col), (t[r] & (0x10 >> col)) ? kRed : kWhite));
  }
  CHECK(Same(Canvas(1, 1, kWhite).At(5, 5), Rgb{}));
  CHECK(Glyph('a') == Glyph('A'));
  CHECK(Glyph('~') == Glyph('?'));
}

TEST_CASE("media: drawing is clipped to the canvas") {
  Canvas c(10, 8, kWhite);
  c.Line(-50, -20, 60, 40, kRed, 3);
  c.FillRect(-5, -5, 100, 3, kRed);
  c.StrokeRect(5, 5, 50, 50, kRed);
  c.Text(-20, -3, "CLIPPED TEXT", kRed);
  c.Text(8, 60, "X", kRed, SIZE_MAX, true);
  REQUIRE(c.image().pixels.size() == 10u * 8u * 3u);
  CHECK(Same(c.At(0, 0), kRed));    // inside the filled band
  CHECK(Same(c.At(9, 7), kWhite));  // the stroke's corner lies outside
  CHECK(Same(c.At(5, 7), kRed));    // its left edge does not
}
