// Fuzz target: an S3 ListObjectsV2 answer (untrusted bytes from the store) read by
// ParseS3Listing, then each key judged as ObjectStore::List judges it. Whatever the bytes,
// no crash, no leak, no undefined behaviour; a listing that goes on has a token; and a key
// taken as a relative name joins to a path inside the folder (checked against
// std::filesystem's lexical normal form, which resolves '.' and '..').
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "base/file.h"
#include "storage/s3.h"

using namespace shardify;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string xml(reinterpret_cast<const char*>(data), size);
  const Result<storage::S3Listing> page = storage::ParseS3Listing(xml);
  if (!page.ok()) return 0;
  if (page->truncated && page->next_token.empty()) std::abort();
  for (const storage::ListedObject& object : page->objects) {
    const std::string& key = object.name;
    const Result<std::string> path = JoinRelative("/stage", key);
    if (path.ok() != IsRelativeName(key)) std::abort();
    if (!path.ok()) continue;
    const std::string normal = std::filesystem::path(*path).lexically_normal().string();
    if (normal != *path || normal.compare(0, 7, "/stage/") != 0) std::abort();
  }
  return 0;
}
