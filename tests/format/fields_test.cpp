#include "format/fields.h"

#include <catch2/catch.hpp>

using namespace shardify;

namespace {
FieldSpec Field(const std::string& name, FieldKind kind, std::vector<KeyValue> meta = {}) {
  FieldSpec f;
  f.name = name;
  f.kind = kind;
  f.dtype = DType::kU8;
  if (kind == FieldKind::kNdarray) f.shape = {1, -1, -1};
  f.meta = std::move(meta);
  return f;
}
}  // namespace

TEST_CASE("format: FindImageField prefers 'image', then the role, then the first ndarray") {
  Manifest m;
  CHECK(FindImageField(m) == -1);
  m.fields = {Field("label", FieldKind::kInt), Field("path", FieldKind::kString)};
  CHECK(FindImageField(m) == -1);  // no ndarray at all
  m.fields.push_back(Field("scan", FieldKind::kNdarray));
  CHECK(FindImageField(m) == 2);  // the first ndarray
  m.fields.push_back(Field("pixels", FieldKind::kNdarray, {{"labels", "{}"}, {"role", "image"}}));
  CHECK(FindImageField(m) == 3);  // the role wins over position
  m.fields.push_back(Field("image", FieldKind::kNdarray));
  CHECK(FindImageField(m) == 4);  // the name wins over the role
  m.fields[4].kind = FieldKind::kBytes;
  CHECK(FindImageField(m) == 3);  // a non-ndarray "image" is not it
}

TEST_CASE("format: FindLabelField finds only an int field 'label'") {
  Manifest m;
  CHECK(FindLabelField(m) == -1);
  m.fields = {Field("image", FieldKind::kNdarray), Field("label", FieldKind::kString)};
  CHECK(FindLabelField(m) == -1);
  m.fields[1].kind = FieldKind::kInt;
  CHECK(FindLabelField(m) == 1);
  m.fields[1].name = "class";
  CHECK(FindLabelField(m) == -1);
}

TEST_CASE("format: MetaValue returns the first value of a key, or empty") {
  const FieldSpec f = Field("mask", FieldKind::kNdarray, {{"role", "mask"}, {"labels", "{\"a\": 1}"}, {"role", "x"}});
  CHECK(MetaValue(f, kMetaRole) == kRoleMask);
  CHECK(MetaValue(f, kMetaLabels) == "{\"a\": 1}");
  CHECK(MetaValue(f, kMetaMultiLabel).empty());
}

TEST_CASE("format: field names match docs/fields.md") {
  // The composed names agree with the ones written out in full.
  CHECK(std::string(kMaskField) + kFgLocationsSuffix == kMaskFgLocationsField);
  CHECK(std::string(kSourcePrefix) + kSpacingSuffix == kSourceSpacingField);
  CHECK(std::string(kSourcePrefix) + kOriginSuffix == kSourceOriginField);
  CHECK(std::string(kSourcePrefix) + kDirectionSuffix == kSourceDirectionField);
  CHECK(std::string(kImageField) + kNiftiHeaderSuffix == "image.nifti_header");
  CHECK(std::string(kGeometrySuffixes[0]) + kGeometrySuffixes[1] + kGeometrySuffixes[2] == ".spacing.origin.direction");
}
