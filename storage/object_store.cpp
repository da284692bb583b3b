#include "storage/object_store.h"

#include <algorithm>

#include "base/file.h"
#include "base/strings.h"
#include "storage/s3.h"

namespace shardify::storage {
namespace {

constexpr uint64_t kMaxListingBytes = 64ull << 20;  // one page of 1,000 keys is ~300 KB

// The most pages a listing of at most `max_keys` keys may take: a store gives up to 1,000
// keys a page; pages a tenth as full, and a few empty ones, are let pass.
uint64_t MaxPages(uint64_t max_keys) { return max_keys / 100 + 10; }

}  // namespace

Result<ObjectStore> ObjectStore::Open(const std::string& location, const TransferOptions& options) {
  ASSIGN_OR_RETURN(Location at, ParseLocation(location));
  if (at.kind != LocationKind::kS3) {
    return Unsupported(ShownLocation(location) +
                       ": datasets are written to s3:// locations (an http(s) server takes no uploads)");
  }
  if (!TransfersAvailable()) return Unsupported(at.text + ": this build has no libcurl, so no remote datasets");
  Result<S3Settings> s3 = S3SettingsFromEnvironment();
  if (!s3.ok()) return s3.status().WithContext(at.text);
  at.base = S3PrefixUrl(*s3, at.bucket, at.prefix);
  std::string bucket_url = S3PrefixUrl(*s3, at.bucket, "");
  TransferOptions transfer = options;
  transfer.aws = s3->signing;
  return ObjectStore(std::move(at), std::move(bucket_url), std::move(transfer));
}

Status ObjectStore::CheckName(const std::string& name) const {
  if (IsRelativeName(name)) return Status::Ok();
  return InvalidArgument(location_.text + ": '" + EscapeNonUtf8(name, true) + "' is not an object name under it");
}

Status ObjectStore::Get(const std::string& name, const std::string& path, SizeBound size) const {
  RETURN_IF_ERROR(CheckName(name));
  return FetchToFile(Url(name), path, size, transfer_);
}

Status ObjectStore::Put(const std::string& name, const std::string& path) const {
  RETURN_IF_ERROR(CheckName(name));
  return PutFile(Url(name), path, transfer_);
}

Status ObjectStore::Delete(const std::string& name) const {
  RETURN_IF_ERROR(CheckName(name));
  return DeleteObject(Url(name), transfer_);
}

Result<std::vector<ListedObject>> ObjectStore::List(const std::string& under, uint64_t max_keys) const {
  const std::string prefix = location_.prefix.empty() ? under : location_.prefix + "/" + under;
  const std::string strip = location_.prefix.empty() ? "" : location_.prefix + "/";
  const std::string shown = location_.text + "/" + under;
  std::vector<ListedObject> objects;
  std::string token;
  for (uint64_t page = 0; page < MaxPages(max_keys); ++page) {
    // The query's parameters in name order: libcurl signs them as given.
    std::string url = bucket_url_ + "?";
    if (!token.empty()) url += "continuation-token=" + PercentEncode(token, false) + "&";
    url += "list-type=2&prefix=" + PercentEncode(prefix, false);
    ASSIGN_OR_RETURN(const std::vector<uint8_t> body, FetchToMemory(url, kMaxListingBytes, transfer_));
    Result<S3Listing> listing = ParseS3Listing(std::string(body.begin(), body.end()));
    if (!listing.ok()) return listing.status().WithContext(ShownLocation(url));
    if (objects.size() + listing->objects.size() > max_keys) {
      return ResourceExhausted(shown + ": the listing names more than " + std::to_string(max_keys) +
                               " objects, the most this operation can need; it is refused");
    }
    for (ListedObject& object : listing->objects) {
      // A key that is not a plain name under the prefix would make a path or a URL outside
      // it (a '..' part, which clients and servers resolve): the whole listing is refused.
      const std::string& key = object.name;
      if (key.compare(0, prefix.size(), prefix) != 0 || !IsRelativeName(key.substr(strip.size()))) {
        return Corruption(shown + ": the listing names key '" + EscapeNonUtf8(key, true) +
                          "', which is not a plain name under '" + prefix +
                          "' (it has an empty, '.' or '..' part, a '/' at an end, a '\\' or a control character); "
                          "the listing is refused");
      }
      objects.push_back({key.substr(strip.size()), object.size});
    }
    if (!listing->truncated) {
      std::sort(objects.begin(), objects.end(),
                [](const ListedObject& a, const ListedObject& b) { return a.name < b.name; });
      return objects;
    }
    token = listing->next_token;
  }
  return ResourceExhausted(shown + ": the listing goes on past " + std::to_string(MaxPages(max_keys)) + " pages (" +
                           std::to_string(objects.size()) + " objects), more than " + std::to_string(max_keys) +
                           " objects can take; it is refused");
}

Result<UploadSummary> ObjectStore::Upload(const std::string& dir, const std::string& under,
                                          const std::vector<std::string>& last, const std::vector<std::string>& skip,
                                          const UploadProgress& progress) const {
  ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(dir));
  std::vector<std::string> order;  // ListDir's order (by name), then `last`
  auto among = [](const std::vector<std::string>& list, const std::string& name) {
    return std::find(list.begin(), list.end(), name) != list.end();
  };
  for (const std::string& name : names) {
    if (!among(last, name) && !among(skip, name) && !IsDirectory(JoinPath(dir, name))) {
      order.push_back(name);
    }
  }
  for (const std::string& name : last) {
    if (among(names, name)) order.push_back(name);
  }
  const std::string folder = under.empty() || under.back() == '/' ? under : under + "/";
  UploadSummary sum;
  for (const std::string& name : order) {
    const std::string path = JoinPath(dir, name);
    ASSIGN_OR_RETURN(const uint64_t bytes, FileSize(path));
    RETURN_IF_ERROR(Put(folder + name, path).WithContext("uploading to " + location_.text));
    ++sum.objects;
    sum.bytes += bytes;
    if (progress) progress(sum.objects, sum.bytes, order.size());
  }
  return sum;
}

}  // namespace shardify::storage
