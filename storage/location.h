// Where a dataset lives: a local directory, or a prefix of objects behind HTTP(S).
#pragma once

#include <string>

#include "base/status.h"

namespace shardify::storage {

enum class LocationKind { kLocal, kHttp };

struct Location {
  LocationKind kind = LocationKind::kLocal;
  std::string text;  // as given, without trailing slashes
  // kHttp: scheme, host, optional port and the path of the dataset, without a trailing
  // slash; an object's URL is base + "/" + name.
  std::string base;
};

// True for "http://" and "https://" locations (the scheme in any case).
bool IsRemote(const std::string& text);

// Parses `text`. Errors: an empty location, a URL without a host, one with a query or
// fragment (an object's name is appended to the path), or an unsupported scheme
// ("s3://", "ftp://", ...), each naming the location.
Result<Location> ParseLocation(const std::string& text);

// The URL of object `name` (a file name of the dataset) under a remote location.
std::string ObjectUrl(const Location& at, const std::string& name);

}  // namespace shardify::storage
