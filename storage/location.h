// Where a dataset lives: a local directory, a prefix of objects behind HTTP(S), or a
// prefix of a bucket in an S3-compatible object store.
#pragma once

#include <string>

#include "base/status.h"

namespace shardify::storage {

enum class LocationKind { kLocal, kHttp, kS3 };

struct Location {
  LocationKind kind = LocationKind::kLocal;
  std::string text;  // as given, without trailing slashes
  // kHttp: scheme, host, optional port and the path of the dataset, without a trailing
  // slash; an object's URL is base + "/" + name. kS3: empty until the endpoint is known
  // (S3PrefixUrl), then the same.
  std::string base;
  // kS3: the bucket, and the key prefix of the dataset's objects ("" or without slashes
  // at either end).
  std::string bucket;
  std::string prefix;
};

// True for "http://", "https://" and "s3://" locations (the scheme in any case).
bool IsRemote(const std::string& text);

// Parses `text`. Errors: an empty location, a URL without a host, one with a query or
// fragment (an object's name is appended to the path), an S3 bucket name S3 does not
// allow, or an unsupported scheme ("ftp://", ...), each naming the location.
Result<Location> ParseLocation(const std::string& text);

// `text` (a location) as a folder name: what follows "scheme://", with characters other
// than letters, digits, '-' and '.' made '_', its last 80 characters.
std::string ReadableName(const std::string& text);

// The URL of object `name` (a file name of the dataset) under a remote location.
std::string ObjectUrl(const Location& at, const std::string& name);

}  // namespace shardify::storage
