// The field names, meta keys and roles that shardify writes and that its readers rely on
// (docs/fields.md). The format itself stores any field; these are conventions above
// it, named once here for convert/, reader/, trainer/, tools/ and the Python binding.
#pragma once

#include <array>
#include <string>

#include "format/manifest.h"

namespace shardify {

// Fields of every converted dataset.
inline constexpr char kImageField[] = "image";  // pixels / voxels, ndarray [C, ...]
inline constexpr char kLabelField[] = "label";  // int class index, -1 when unlabeled
inline constexpr char kMaskField[] = "mask";    // segmentation, ndarray on the image's grid
inline constexpr char kPathField[] = "path";    // string: the sample in the source's terms
inline constexpr char kIndexField[] = "index";  // int: the source sample of a prediction

// Per-field records, named "<field><suffix>" (e.g. "image.spacing").
inline constexpr char kSpacingSuffix[] = ".spacing";              // f64 [S], ITK order
inline constexpr char kOriginSuffix[] = ".origin";                // f64 [S]
inline constexpr char kDirectionSuffix[] = ".direction";          // f64 [S*S], row-major
inline constexpr char kNiftiHeaderSuffix[] = ".nifti_header";     // bytes: the source header
inline constexpr char kSourceDTypeSuffix[] = ".source_dtype";     // string: a sample's own dtype
inline constexpr char kNormalizationSuffix[] = ".normalization";  // f64 [C, 4]
inline constexpr char kFgLocationsSuffix[] = ".fg_locations";     // i32 [N, 1 + S]
// The geometry suffixes in the order in which every writer stores them.
inline constexpr std::array<const char*, 3> kGeometrySuffixes = {kSpacingSuffix, kOriginSuffix, kDirectionSuffix};
inline constexpr char kMaskFgLocationsField[] = "mask.fg_locations";

// The source-grid record of a preprocessed sample: "source" + a geometry suffix, and the
// shape and crop box of the source (array axis order).
inline constexpr char kSourcePrefix[] = "source";
inline constexpr char kSourceShapeField[] = "source.shape";
inline constexpr char kSourceCropBoxField[] = "source.crop_box";
inline constexpr char kSourceSpacingField[] = "source.spacing";
inline constexpr char kSourceOriginField[] = "source.origin";
inline constexpr char kSourceDirectionField[] = "source.direction";

// Keys of FieldSpec::meta.
inline constexpr char kMetaRole[] = "role";
inline constexpr char kMetaLabels[] = "labels";               // JSON object: class name -> value
inline constexpr char kMetaChannelNames[] = "channel_names";  // JSON object (nnU-Net)
inline constexpr char kMetaMultiLabel[] = "multi_label";      // "true": one 0/1 channel per class
inline constexpr char kMetaMaxPerClass[] = "max_per_class";   // on fg_locations

// Values of the "role" meta.
inline constexpr char kRoleImage[] = "image";
inline constexpr char kRoleLabel[] = "label";
inline constexpr char kRoleMask[] = "mask";
inline constexpr char kRolePath[] = "path";
inline constexpr char kRoleIndex[] = "index";
inline constexpr char kRoleGeometry[] = "geometry";
inline constexpr char kRoleNiftiHeader[] = "nifti_header";
inline constexpr char kRoleSourceDType[] = "source_dtype";
inline constexpr char kRoleSourceGrid[] = "source_grid";
inline constexpr char kRoleNormalization[] = "normalization";
inline constexpr char kRoleFgLocations[] = "fg_locations";

// The value of `key` in `f.meta` (the first, should it repeat), or "" when absent; the same
// in any key-value list (a provenance's options).
std::string MetaValue(const FieldSpec& f, const std::string& key);
std::string MetaValue(const std::vector<KeyValue>& entries, const std::string& key);

// The field that holds the pixels: "image" when it is an ndarray, else the first ndarray
// whose role is "image", else the first ndarray field; -1 when `m` has no ndarray field.
int FindImageField(const Manifest& m);

// The field "label" when it is an int field, else -1.
int FindLabelField(const Manifest& m);

}  // namespace shardify
