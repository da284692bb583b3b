// Resampling with ITK's ResampleImageFilter (see resample_internal.h). Kept apart from
// image_io_itk.cpp: these are the converter's only templated ITK pipelines.
#include <itkBSplineInterpolateImageFunction.h>
#include <itkImage.h>
#include <itkLinearInterpolateImageFunction.h>
#include <itkNearestNeighborInterpolateImageFunction.h>
#include <itkResampleImageFilter.h>

#include <algorithm>
#include <exception>

#include "convert/preprocess/resample_internal.h"

namespace shardify::convert::detail {
namespace {

using Volume = itk::Image<float, 3>;

// Axis a of ITK (x, y, z) is axis 2 - a of the array (z, y, x).
Volume::SizeType ItkSize(const Shape& zyx) {
  Volume::SizeType s;
  for (unsigned a = 0; a < 3; ++a) s[a] = static_cast<itk::SizeValueType>(zyx[2 - a]);
  return s;
}

void SetGeometry(const Geometry& g, Volume::SpacingType* spacing, Volume::PointType* origin,
                 Volume::DirectionType* direction) {
  for (unsigned a = 0; a < 3; ++a) {
    (*spacing)[a] = g.spacing[a];
    (*origin)[a] = g.origin[a];
    for (unsigned c = 0; c < 3; ++c) (*direction)[a][c] = g.direction[a * 3 + c];
  }
}

Volume::Pointer MakeVolume(const float* data, const Grid& g) {
  Volume::Pointer v = Volume::New();
  Volume::RegionType region;
  region.SetSize(ItkSize(g.size));
  v->SetRegions(region);
  v->Allocate();
  std::copy(data, data + region.GetNumberOfPixels(), v->GetBufferPointer());
  Volume::SpacingType spacing;
  Volume::PointType origin;
  Volume::DirectionType direction;
  SetGeometry(g.geometry, &spacing, &origin, &direction);
  v->SetSpacing(spacing);
  v->SetOrigin(origin);
  v->SetDirection(direction);
  return v;
}

itk::InterpolateImageFunction<Volume, double>::Pointer MakeInterpolator(Interpolator interp) {
  if (interp == Interpolator::kNearest)
    return itk::NearestNeighborInterpolateImageFunction<Volume, double>::New().GetPointer();
  if (interp == Interpolator::kLinear) return itk::LinearInterpolateImageFunction<Volume, double>::New().GetPointer();
  auto spline = itk::BSplineInterpolateImageFunction<Volume, double, double>::New();
  spline->SetSplineOrder(3);
  return spline.GetPointer();
}

// Voxels of edge padding per side for the cubic B-spline: scipy's zoom with mode 'nearest'
// (which skimage's resize with mode='edge', nnU-Net's call, runs) pads each axis so before
// it computes the coefficients. ITK's mirror at the edge instead moved the voxels near the
// edges of a z-scored brain MRI by up to 0.40 from nnU-Net's; the padding's own far end
// weighs 0.268^12 (1.4e-7) on the first voxel.
constexpr int64_t kSplinePad = 12;

// `in` (grid `from`) with pad[a] copies of its edge voxels before and after it along each
// array axis a, and its grid: the same voxels, the origin moved back by the padding.
std::vector<float> EdgePadded(const float* in, const Grid& from, const Shape& pad, Grid* padded) {
  padded->geometry = from.geometry;
  padded->size = from.size;
  for (unsigned a = 0; a < 3; ++a) padded->size[a] += 2 * pad[a];
  for (unsigned r = 0; r < 3; ++r) {
    for (unsigned a = 0; a < 3; ++a) {  // ITK axis a, array axis 2 - a
      padded->geometry.origin[r] -=
          from.geometry.direction[r * 3 + a] * from.geometry.spacing[a] * static_cast<double>(pad[2 - a]);
    }
  }
  const Shape& n = from.size;
  const Shape& m = padded->size;
  auto source = [&](unsigned a, int64_t i) { return std::clamp<int64_t>(i - pad[a], 0, n[a] - 1); };
  std::vector<float> out(static_cast<size_t>(m[0] * m[1] * m[2]));
  float* o = out.data();
  for (int64_t z = 0; z < m[0]; ++z) {
    for (int64_t y = 0; y < m[1]; ++y) {
      const float* row = in + (source(0, z) * n[1] + source(1, y)) * n[2];
      for (int64_t x = 0; x < m[2]; ++x) *o++ = row[source(2, x)];
    }
  }
  return out;
}

void ResampleChannel(const float* in, const Grid& from, const Grid& to, Interpolator interp, float* out) {
  using Filter = itk::ResampleImageFilter<Volume, Volume, double>;
  Filter::Pointer f = Filter::New();
  if (interp == Interpolator::kCubic) {  // axes that keep their size keep their voxels: not padded
    Shape pad(3);
    for (unsigned a = 0; a < 3; ++a) pad[a] = from.size[a] == to.size[a] ? 0 : kSplinePad;
    Grid padded;
    const std::vector<float> p = EdgePadded(in, from, pad, &padded);
    f->SetInput(MakeVolume(p.data(), padded));
  } else {
    f->SetInput(MakeVolume(in, from));
  }
  f->SetInterpolator(MakeInterpolator(interp));
  f->SetSize(ItkSize(to.size));
  Volume::SpacingType spacing;
  Volume::PointType origin;
  Volume::DirectionType direction;
  SetGeometry(to.geometry, &spacing, &origin, &direction);
  f->SetOutputSpacing(spacing);
  f->SetOutputOrigin(origin);
  f->SetOutputDirection(direction);
  f->SetDefaultPixelValue(0);
  f->SetNumberOfWorkUnits(1);  // the converter runs cases in parallel already (--threads)
  f->Update();
  const Volume* r = f->GetOutput();
  std::copy(r->GetBufferPointer(), r->GetBufferPointer() + r->GetLargestPossibleRegion().GetNumberOfPixels(), out);
}

}  // namespace

Grid ResampledGrid(const Grid& from, const Shape& size) {
  Grid g;
  g.size = size;
  g.geometry = from.geometry;
  for (unsigned a = 0; a < 3; ++a) {  // ITK axis a, array axis 2 - a
    const double n = static_cast<double>(from.size[2 - a]), m = static_cast<double>(size[2 - a]);
    g.geometry.spacing[a] = from.geometry.spacing[a] * n / m;
  }
  for (unsigned r = 0; r < 3; ++r) {  // origin += direction * (spacing * (0.5 n / m - 0.5))
    double shift = 0;
    for (unsigned a = 0; a < 3; ++a) {
      const double n = static_cast<double>(from.size[2 - a]), m = static_cast<double>(size[2 - a]);
      shift += from.geometry.direction[r * 3 + a] * from.geometry.spacing[a] * (0.5 * n / m - 0.5);
    }
    g.geometry.origin[r] = from.geometry.origin[r] + shift;
  }
  return g;
}

Status ResampleFloat(const std::vector<float>& in, int64_t channels, const Grid& from, const Grid& to,
                     Interpolator interp, std::vector<float>* out) {
  ASSIGN_OR_RETURN(const uint64_t n_in, ElementCount(from.size));
  ASSIGN_OR_RETURN(const uint64_t n_out, ElementCount(to.size));
  if (from.size.size() != 3 || to.size.size() != 3 || from.geometry.spacing.size() != 3 ||
      to.geometry.spacing.size() != 3 || in.size() != n_in * static_cast<uint64_t>(channels)) {
    return Internal("resampling needs 3D grids and " + std::to_string(n_in) + " values per channel");
  }
  out->assign(n_out * static_cast<uint64_t>(channels), 0.0f);
  try {
    for (int64_t c = 0; c < channels; ++c) {
      ResampleChannel(in.data() + c * n_in, from, to, interp, out->data() + c * n_out);
    }
  } catch (const itk::ExceptionObject& e) {
    return Internal(std::string("ITK resampling failed: ") + e.GetDescription());
  } catch (const std::bad_alloc&) {
    throw;  // the pipeline turns it into an error naming the case
  } catch (const std::exception& e) {
    return Internal(std::string("resampling failed: ") + e.what());
  }
  return Status::Ok();
}

}  // namespace shardify::convert::detail
