// A 5x7 pixel font for captions in contact sheets. Internal.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shardify::tools::detail {

inline constexpr int kGlyphWidth = 5;
inline constexpr int kGlyphHeight = 7;
inline constexpr int kGlyphAdvance = 6;  // glyph width plus one column of space

// Rows of the glyph for `c`, top first; bit 4 is the leftmost pixel. Lower case is drawn
// as upper case; characters without a glyph are drawn as '?'; space is blank.
const uint8_t* Glyph(char c);

// Draws `text` into an RGB8 image (`width` x `height`) at (x, y) in colour `rgb`,
// clipped to the image and to `max_chars` characters.
void DrawText(std::vector<uint8_t>& image, uint32_t width, uint32_t height, int x, int y, const std::string& text,
              const uint8_t rgb[3], size_t max_chars);

}  // namespace shardify::tools::detail
