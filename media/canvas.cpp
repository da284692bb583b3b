#include "media/canvas.h"

#include <algorithm>
#include <cstdlib>

#include "media/png.h"

namespace shardify::media {

Canvas::Canvas(uint32_t width, uint32_t height, Rgb background) {
  image_.width = width;
  image_.height = height;
  image_.pixels.resize(size_t{width} * height * 3);
  for (size_t p = 0; p < image_.pixels.size(); p += 3) {
    image_.pixels[p] = background.r;
    image_.pixels[p + 1] = background.g;
    image_.pixels[p + 2] = background.b;
  }
}

Rgb Canvas::At(int x, int y) const {
  if (x < 0 || y < 0 || x >= static_cast<int>(image_.width) || y >= static_cast<int>(image_.height)) return {};
  const uint8_t* p = &image_.pixels[(size_t(y) * image_.width + size_t(x)) * 3];
  return {p[0], p[1], p[2]};
}

void Canvas::Dot(int x, int y, Rgb c) {
  if (x < 0 || y < 0 || x >= static_cast<int>(image_.width) || y >= static_cast<int>(image_.height)) return;
  uint8_t* p = &image_.pixels[(size_t(y) * image_.width + size_t(x)) * 3];
  p[0] = c.r;
  p[1] = c.g;
  p[2] = c.b;
}

void Canvas::Line(int x0, int y0, int x1, int y1, Rgb c, int thick) {
  const int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
  const int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
  for (int err = dx + dy;;) {
    for (int t = 0; t < thick; ++t) {
      for (int u = 0; u < thick; ++u) Dot(x0 + t, y0 + u, c);
    }
    if (x0 == x1 && y0 == y1) break;
    const int e2 = 2 * err;
    if (e2 >= dy) err += dy, x0 += sx;
    if (e2 <= dx) err += dx, y0 += sy;
  }
}

void Canvas::FillRect(int x, int y, int w, int h, Rgb c) {
  const int x0 = std::max(x, 0), y0 = std::max(y, 0);
  const int x1 = std::min<int64_t>(int64_t{x} + w, image_.width), y1 = std::min<int64_t>(int64_t{y} + h, image_.height);
  for (int yy = y0; yy < y1; ++yy) {
    for (int xx = x0; xx < x1; ++xx) Dot(xx, yy, c);
  }
}

void Canvas::StrokeRect(int x, int y, int w, int h, Rgb c) {
  if (w <= 0 || h <= 0) return;
  Line(x, y, x + w - 1, y, c);
  Line(x, y + h - 1, x + w - 1, y + h - 1, c);
  Line(x, y, x, y + h - 1, c);
  Line(x + w - 1, y, x + w - 1, y + h - 1, c);
}

void Canvas::Text(int x, int y, const std::string& text, Rgb c, size_t max_chars, bool vertical) {
  const size_t n = std::min(text.size(), max_chars);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* rows = Glyph(text[i]);
    const int advance = static_cast<int>(i) * kGlyphAdvance;
    for (int r = 0; r < kGlyphHeight; ++r) {
      for (int col = 0; col < kGlyphWidth; ++col) {
        if (!(rows[r] & (0x10 >> col))) continue;
        if (vertical) {
          Dot(x + r, y - advance - col, c);
        } else {
          Dot(x + advance + col, y + r, c);
        }
      }
    }
  }
}

Status Canvas::WritePng(const std::string& path) const {
  return WritePngFile(path, image_.pixels.data(), image_.width, image_.height, 3, 8);
}

}  // namespace shardify::media
