// Helpers shared by the shardtool subcommands. Internal to tools/.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/dataset.h"
#include "format/elements.h"
#include "format/fields.h"
#include "format/manifest.h"
#include "format/types.h"

namespace shardify::tools::detail {

// Opens `dir` with default read options (checksums on), reading shards as `io` says.
Result<std::unique_ptr<Dataset>> OpenDataset(const std::string& dir, IoMode io);

// Field conventions (format/fields.h).
using shardify::FindImageField;
using shardify::FindLabelField;
using shardify::MetaValue;
// The ndarray field `name`; when `name` is empty, FindImageField. NotFound names the field.
Result<size_t> ResolveArrayField(const Manifest& m, const std::string& name);

// "T-shirt" for a label with a class name, the number otherwise, "-" for -1.
std::string ClassName(const Manifest& m, int64_t label);

// Maps a global sample index to its split name; fastest when indices ascend.
class SplitCursor {
 public:
  explicit SplitCursor(const Manifest& m) : m_(m) {}
  const std::string& Name(uint64_t index);

 private:
  const Manifest& m_;
  size_t at_ = 0;
  std::string none_ = "-";
};

// The sample range [first, end) of split `name`, or all samples when `name` is empty.
struct Range {
  uint64_t first = 0;
  uint64_t end = 0;
};
Result<Range> SplitRange(const Manifest& m, const std::string& name);

// One element as a double, half precision (format/elements.h).
using shardify::ElementAsDouble;
using shardify::HalfToFloat;

// Stored and decoded bytes of ndarray `field` of a sample, whether it is one blob or
// chunked (then the sum over its chunks).
struct ArraySize {
  uint64_t stored = 0;
  uint64_t raw = 0;
  uint64_t chunks = 0;  // 0 when stored as one blob
};
Result<ArraySize> SizeOf(const SampleView& s, size_t field, bool chunked);

// Decodes ndarray `field` of `s` into a new buffer.
Result<std::vector<uint8_t>> DecodeArray(const SampleView& s, size_t field, Decoder& d);

// "1.5 MiB", "312 B".
std::string HumanBytes(uint64_t n);

// Compact JSON text. Strings are written byte for byte where they are well-formed UTF-8;
// any other byte 0xHH (a name from a Latin-1 file system, bytes from disk) becomes the
// escape \udcHH, as Python's surrogateescape spells it, so the text round-trips:
// os.fsencode(json.loads(text)[...]) gives back the bytes. Never throws.
std::string Dump(const nlohmann::json& j);

// Writes one JSON object member by member, so output starts before all of it is known.
class JsonObjectStream {
 public:
  explicit JsonObjectStream(std::ostream& out);
  void Put(const std::string& key, const nlohmann::json& value);
  // Members of an array value, written one at a time.
  void BeginArray(const std::string& key);
  void Item(const nlohmann::json& value);
  void EndArray();
  // Writes the closing brace and a newline.
  void End();

 private:
  void Key(const std::string& key);
  std::ostream& out_;
  bool first_member_ = true;
  bool first_item_ = true;
};

}  // namespace shardify::tools::detail
