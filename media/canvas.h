// Canvas: an 8-bit RGB image to draw on, with lines, rectangles and a 5x7 pixel font, for
// training curves, contact sheets and previews. Everything is clipped to the image, so
// no coordinate can write out of bounds. Not thread-safe; cheap to move.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace shardify::media {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
};

// Row-major pixels, 3 bytes (R, G, B) each.
struct RgbImage {
  uint32_t width = 0, height = 0;
  std::vector<uint8_t> pixels;
};

// The font: glyphs of 5x7 pixels on a 6-pixel advance. Lower case is drawn as upper case;
// a character without a glyph is drawn as '?'.
inline constexpr int kGlyphWidth = 5;
inline constexpr int kGlyphHeight = 7;
inline constexpr int kGlyphAdvance = 6;

// Rows of the glyph for `c`, top first; bit 4 is the leftmost pixel.
const uint8_t* Glyph(char c);

class Canvas {
 public:
  Canvas(uint32_t width, uint32_t height, Rgb background);
  uint32_t width() const { return image_.width; }
  uint32_t height() const { return image_.height; }
  const RgbImage& image() const { return image_; }
  RgbImage Take() { return std::move(image_); }
  // The pixel at (x, y); black outside the image.
  Rgb At(int x, int y) const;

  void Dot(int x, int y, Rgb c);
  // A line from (x0, y0) to (x1, y1), `thick` pixels wide (Bresenham).
  void Line(int x0, int y0, int x1, int y1, Rgb c, int thick = 1);
  void FillRect(int x, int y, int w, int h, Rgb c);
  void StrokeRect(int x, int y, int w, int h, Rgb c);
  // Draws at most `max_chars` characters of `text` with its top-left corner at (x, y);
  // `vertical` draws it bottom to top (rotated 90 degrees counter-clockwise), with (x, y)
  // its bottom-left corner.
  void Text(int x, int y, const std::string& text, Rgb c, size_t max_chars = SIZE_MAX, bool vertical = false);
  // Width in pixels of `chars` characters of text.
  static int TextWidth(size_t chars) { return static_cast<int>(chars) * kGlyphAdvance; }

  // Encodes the image as an 8-bit RGB PNG and writes `path` atomically.
  Status WritePng(const std::string& path) const;

 private:
  RgbImage image_;
};

}  // namespace shardify::media
