// Reading one case of a SourcePlan: header inspection (for the schema) and decoding.
// The image and the mask come from the case's files, or from its CaseSource where that
// supplies them (source.h). A case's channel files, and its mask file, must share spatial
// shape and geometry; errors name the case and the file, and say what differs.
// Thread-safe (the case is read only).
#pragma once

#include "convert/decode/image_io.h"
#include "convert/sources/source.h"

namespace shardify::convert {

struct CaseInfo {
  ImageInfo image;  // channels stacked: C is the sum over the channel files
  bool has_mask = false;
  ImageInfo mask;
  std::vector<uint8_t> small_file;  // single-file cases: the file, when it was read whole
};

// The spatial axes of a case's channel-first shape (all but the first).
inline Shape SpatialShape(const Shape& shape) { return Shape(shape.begin() + 1, shape.end()); }

struct CaseData {
  DecodedImage image;
  bool has_mask = false;
  DecodedImage mask;
};

// How InspectCase and DecodeCase read a case's files.
struct CaseReading {
  uint64_t max_bytes = kDefaultMaxImageBytes;  // what each file may decode to (ReadImageInfo)
  // Each file's values as its NIfTI scaling gives them (ScaleInfo, ScaleImage), for code
  // that interprets values (preprocessing, --dtype); false: as stored, so that export
  // gives the source back.
  bool scaled = false;
};

// Reads headers only.
Result<CaseInfo> InspectCase(const CaseInput& in, const CaseReading& reading = {});
// Reads headers and pixels; each file is checked against reading.max_bytes before its
// pixels are allocated. `small_file`, when non-null and non-empty, is CaseInfo::small_file
// from InspectCase and saves reading the file again.
Result<CaseData> DecodeCase(const CaseInput& in, const std::vector<uint8_t>* small_file = nullptr,
                            const CaseReading& reading = {});

// Decodes run-length `rle` ("start length ..." with 1-based starts over `n` pixels) by
// setting those pixels of `out` (n bytes) to 1. `where` names the case in errors.
Status DecodeRle(const std::string& rle, uint8_t* out, uint64_t n, const std::string& where);

}  // namespace shardify::convert
