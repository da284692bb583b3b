#include "format/fields.h"

namespace shardify {

std::string MetaValue(const std::vector<KeyValue>& entries, const std::string& key) {
  for (const KeyValue& kv : entries) {
    if (kv.key == key) return kv.value;
  }
  return "";
}

std::string MetaValue(const FieldSpec& f, const std::string& key) { return MetaValue(f.meta, key); }

int FindImageField(const Manifest& m) {
  const int named = m.FindField(kImageField);
  if (named >= 0 && m.fields[named].kind == FieldKind::kNdarray) return named;
  int first = -1;
  for (size_t i = 0; i < m.fields.size(); ++i) {
    if (m.fields[i].kind != FieldKind::kNdarray) continue;
    if (MetaValue(m.fields[i], kMetaRole) == kRoleImage) return static_cast<int>(i);
    if (first < 0) first = static_cast<int>(i);
  }
  return first;
}

int FindLabelField(const Manifest& m) {
  const int i = m.FindField(kLabelField);
  return (i >= 0 && m.fields[i].kind == FieldKind::kInt) ? i : -1;
}

}  // namespace shardify
