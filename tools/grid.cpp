#include "tools/grid.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <unordered_set>

#include "format/dataset.h"
#include "media/canvas.h"
#include "tools/plane_internal.h"
#include "tools/tool_internal.h"

namespace shardify::tools {

GridLayout ComputeGridLayout(size_t count, uint32_t tile, uint32_t columns, bool legend) {
  GridLayout g;
  if (count == 0) return g;
  g.columns = columns ? columns : static_cast<uint32_t>(std::ceil(std::sqrt(static_cast<double>(count))));
  g.columns = std::min<uint32_t>(g.columns, static_cast<uint32_t>(count));
  g.rows = static_cast<uint32_t>((count + g.columns - 1) / g.columns);
  g.width = g.columns * (tile + kGridPad) + kGridPad;
  g.tiles_top = kGridLine;
  g.height = g.tiles_top + g.rows * (tile + kGridCaption + kGridPad) + kGridPad;
  if (legend) {
    g.legend_top = g.height;
    g.height += kGridLine;
  }
  return g;
}

namespace {

uint64_t SplitMix(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

std::vector<uint64_t> DrawSamples(uint64_t first, uint64_t end, size_t count, uint64_t seed) {
  const uint64_t n = end > first ? end - first : 0;
  std::vector<uint64_t> out;
  if (count >= n) {
    for (uint64_t i = first; i < end; ++i) out.push_back(i);
    return out;
  }
  // Floyd's algorithm: `count` distinct values in O(count).
  std::unordered_set<uint64_t> chosen;
  uint64_t state = seed;
  for (uint64_t j = n - count; j < n; ++j) {
    const uint64_t t = SplitMix(state) % (j + 1);
    chosen.insert(chosen.count(t) ? j : t);
  }
  for (uint64_t v : chosen) out.push_back(first + v);
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

// One colour per mask label, cycling.
const uint8_t kPalette[][3] = {{230, 25, 75},  {60, 180, 75},  {255, 225, 25}, {0, 130, 200},
                               {245, 130, 48}, {145, 30, 180}, {70, 240, 240}, {240, 50, 230}};

constexpr media::Rgb kText{235, 235, 235};

// The mask label at (x, y) of a mask plane: the value of a one-channel label map, or
// 1 + the first non-zero channel of a one-channel-per-class mask; 0 = background.
int MaskLabel(const detail::Plane& m, uint32_t x, uint32_t y) {
  if (m.channels == 1) {
    const double v = m.at(0, y, x);
    if (v == 0 || !(v == v)) return 0;
    return v > 0 && v < 1e6 ? std::max(1, static_cast<int>(v)) : 1;
  }
  for (uint32_t c = 0; c < m.channels; ++c) {
    if (m.at(c, y, x) != 0) return static_cast<int>(c) + 1;
  }
  return 0;
}

// Draws `p` scaled into the tile at (x0, y0), `mask` over it; adds the mask labels drawn
// to `labels`.
void DrawTile(media::Canvas& cv, uint32_t x0, uint32_t y0, uint32_t tile, const detail::Plane& p, DType dtype,
              const detail::Plane* mask, std::set<int>* labels) {
  const std::vector<uint8_t> rgb = detail::ToRgb8(p, dtype);
  const double s = std::min(double(tile) / p.width, double(tile) / p.height);
  const uint32_t dw = std::max<uint32_t>(1, std::min<uint32_t>(tile, std::lround(p.width * s)));
  const uint32_t dh = std::max<uint32_t>(1, std::min<uint32_t>(tile, std::lround(p.height * s)));
  const uint32_t ox = x0 + (tile - dw) / 2, oy = y0 + (tile - dh) / 2;
  const bool use_mask = mask && mask->width == p.width && mask->height == p.height;
  for (uint32_t y = 0; y < dh; ++y) {
    const uint32_t sy = uint64_t(y) * p.height / dh;
    for (uint32_t x = 0; x < dw; ++x) {
      const uint32_t sx = uint64_t(x) * p.width / dw;
      const uint8_t* src = &rgb[(size_t(sy) * p.width + sx) * 3];
      const int label = use_mask ? MaskLabel(*mask, sx, sy) : 0;
      if (label > 0) labels->insert(label);
      uint8_t px[3];
      for (int k = 0; k < 3; ++k) {
        px[k] = label > 0 ? static_cast<uint8_t>((src[k] + kPalette[(label - 1) % 8][k]) / 2) : src[k];
      }
      cv.Dot(static_cast<int>(ox + x), static_cast<int>(oy + y), {px[0], px[1], px[2]});
    }
  }
}

Result<detail::Plane> PlaneOf(const Dataset& ds, const SampleView& s, size_t f, Decoder& d) {
  ASSIGN_OR_RETURN(Shape shape, s.shape(f));
  ASSIGN_OR_RETURN(std::vector<uint8_t> raw, detail::DecodeArray(s, f, d));
  return detail::ExtractPlane(raw.data(), raw.size(), ds.manifest().fields[f].dtype, shape);
}

// The mask field drawn over field `field`, or -1.
int MaskFieldFor(const Manifest& m, size_t field) {
  const int mf = m.FindField(kMaskField);
  const bool drawn = mf >= 0 && static_cast<size_t>(mf) != field && m.fields[mf].kind == FieldKind::kNdarray;
  return drawn ? mf : -1;
}

Status DrawSample(const Dataset& ds, uint64_t index, size_t field, uint32_t x0, uint32_t y0, uint32_t tile, Decoder& d,
                  media::Canvas& cv, std::string* caption, std::set<int>* labels) {
  const Manifest& m = ds.manifest();
  ASSIGN_OR_RETURN(SampleView s, ds.Sample(index));
  ASSIGN_OR_RETURN(detail::Plane p, PlaneOf(ds, s, field, d));
  const int mf = MaskFieldFor(m, field);
  detail::Plane mask;
  if (mf >= 0) {
    ASSIGN_OR_RETURN(mask, PlaneOf(ds, s, static_cast<size_t>(mf), d));
  }
  DrawTile(cv, x0, y0, tile, p, m.fields[field].dtype, mf >= 0 ? &mask : nullptr, labels);
  const int lf = detail::FindLabelField(m);
  *caption = "#" + std::to_string(index);
  if (lf >= 0) {
    ASSIGN_OR_RETURN(int64_t label, s.int_value(lf));
    if (label >= 0) *caption = detail::ClassName(m, label);
  }
  cv.Text(static_cast<int>(x0) + 1, static_cast<int>(y0 + tile) + 2, *caption, kText, tile / media::kGlyphAdvance);
  return Status::Ok();
}

// "mask:" and a swatch and number for each label drawn, as many as the line holds.
void DrawLegend(media::Canvas& cv, uint32_t top, const std::set<int>& labels) {
  const int y = static_cast<int>(top + kGridPad);
  int x = static_cast<int>(kGridPad);
  const std::string head = labels.empty() ? "mask: no label in these samples" : "mask:";
  cv.Text(x, y, head, kText);
  x += media::Canvas::TextWidth(head.size() + 1);
  for (int label : labels) {
    const std::string text = std::to_string(label);
    const int w = media::kGlyphHeight + 2 + media::Canvas::TextWidth(text.size() + 1);
    if (x + w > static_cast<int>(cv.width())) {
      cv.Text(x, y, "...", kText);
      break;
    }
    const uint8_t* c = kPalette[(label - 1) % 8];
    cv.FillRect(x, y, media::kGlyphHeight, media::kGlyphHeight, {c[0], c[1], c[2]});
    cv.Text(x + media::kGlyphHeight + 2, y, text, kText);
    x += w;
  }
}

}  // namespace

Status RunGrid(const std::string& dir, const std::string& path, const GridOptions& options, std::ostream& out) {
  if (options.tile < 16 || options.tile > 1024) return InvalidArgument("--tile must be 16..1024");
  if (options.count == 0 || options.count > 10000) return InvalidArgument("--count must be 1..10000");
  ASSIGN_OR_RETURN(auto ds, detail::OpenDataset(dir, options.io));
  const Manifest& m = ds->manifest();
  ASSIGN_OR_RETURN(size_t field, detail::ResolveArrayField(m, options.field));
  ASSIGN_OR_RETURN(detail::Range range, detail::SplitRange(m, options.split));
  const std::vector<uint64_t> picks = DrawSamples(range.first, range.end, options.count, options.seed);
  if (picks.empty()) return NotFound("no samples to draw in " + ds->dir());
  const bool legend = MaskFieldFor(m, field) >= 0;
  const GridLayout g = ComputeGridLayout(picks.size(), options.tile, options.columns, legend);
  if (uint64_t(g.width) * g.height > (uint64_t(1) << 28)) {
    return InvalidArgument("a sheet of " + std::to_string(g.width) + "x" + std::to_string(g.height) +
                           " pixels is too large; lower --count or --tile");
  }
  media::Canvas cv(g.width, g.height, {24, 24, 24});
  Decoder d;
  std::vector<std::string> captions(picks.size());
  std::set<int> labels;
  for (size_t k = 0; k < picks.size(); ++k) {
    const uint32_t x0 = kGridPad + (k % g.columns) * (options.tile + kGridPad);
    const uint32_t y0 = g.tiles_top + (k / g.columns) * (options.tile + kGridCaption + kGridPad);
    Status st = DrawSample(*ds, picks[k], field, x0, y0, options.tile, d, cv, &captions[k], &labels);
    if (!st.ok()) return st.WithContext("grid: sample " + std::to_string(picks[k]));
  }
  const uint64_t available = range.end - range.first;
  std::string name = ds->dir();
  while (name.size() > 1 && name.back() == '/') name.pop_back();
  const std::string title = name.substr(name.find_last_of('/') + 1) + ", " +
                            (options.split.empty() ? "all splits" : "split " + options.split) + ", field " +
                            m.fields[field].name + ": " + std::to_string(picks.size()) + " of " +
                            std::to_string(available) + " samples, seed " + std::to_string(options.seed);
  cv.Text(static_cast<int>(kGridPad), static_cast<int>(kGridPad), title, kText,
          (g.width - 2 * kGridPad) / media::kGlyphAdvance);
  if (legend) DrawLegend(cv, g.legend_top, labels);
  RETURN_IF_ERROR(cv.WritePng(path));
  if (options.json) {
    out << detail::Dump({{"file", path},
                         {"width", g.width},
                         {"height", g.height},
                         {"columns", g.columns},
                         {"rows", g.rows},
                         {"samples", picks},
                         {"captions", captions},
                         {"title", title},
                         {"mask_labels", std::vector<int>(labels.begin(), labels.end())}})
        << "\n";
  } else {
    out << "wrote " << path << " (" << g.width << "x" << g.height << ", " << picks.size() << " samples of field "
        << m.fields[field].name << ")\n";
  }
  return Status::Ok();
}

}  // namespace shardify::tools
