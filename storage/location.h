// Where a dataset lives: a local directory, a prefix of objects behind HTTP(S), or a
// prefix of a bucket in an S3-compatible object store.
#pragma once

#include <string>

#include "base/status.h"

namespace shardify::storage {

enum class LocationKind { kLocal, kHttp, kS3 };

struct Location {
  LocationKind kind = LocationKind::kLocal;
  std::string text;  // as given, without trailing slashes; remote: as ShownLocation shows it
  // kHttp: scheme, host, optional port and the path of the dataset, without a trailing
  // slash; an object's URL is base + "/" + name. kS3: empty until the endpoint is known
  // (S3PrefixUrl), then the same.
  std::string base;
  // kHttp: the location's query ("?..." or ""), appended to every object's URL: a token
  // that grants the whole prefix (a signed-prefix or shared-access URL). `text` is
  // ShownLocation's, so that messages do not carry the token.
  std::string query;
  // kS3: the bucket, and the key prefix of the dataset's objects ("" or without slashes
  // at either end).
  std::string bucket;
  std::string prefix;
};

// True for "http://", "https://" and "s3://" locations (the scheme in any case).
bool IsRemote(const std::string& text);

// Parses `text`. Errors: an empty location, a URL without a host, one with a fragment, an
// s3:// location with a query, an S3 bucket name S3 does not allow, or an unsupported
// scheme ("ftp://", ...), each naming the location (its query shown as "?...").
Result<Location> ParseLocation(const std::string& text);

// `text` (a location) as a folder name: what follows "scheme://", with characters other
// than letters, digits, '-' and '.' made '_', its last 80 characters.
std::string ReadableName(const std::string& text);

// The URL of object `name` under a remote location, with the location's query. `name` (a
// file name of the dataset, or a relative name with '/' between folders) is
// percent-encoded with its slashes kept, so that no client or server reads a '?', '#',
// '%' or space in it as part of the URL's syntax.
std::string ObjectUrl(const Location& at, const std::string& name);

// `text` percent-encoded (RFC 3986, as S3's signatures want it too): every byte but the
// unreserved A-Z a-z 0-9 - . _ ~ (and '/' when `keep_slashes`) as %XX, upper-case hex.
std::string PercentEncode(const std::string& text, bool keep_slashes);

// `location` (a dataset's location, or an object's URL) as people are shown it, in
// messages, logs, reports, --json and repr alike: a URL's query as "?..." (it may hold a
// token that grants the prefix) and a user name or password before its host as "...@";
// anything else (a directory) as it is. The one place a location is rendered for
// people.
std::string ShownLocation(const std::string& location);

// "scheme://host:port" of an http(s) URL: scheme and host in lower case, the port given or
// the scheme's own (80, 443); "" for anything else. Two URLs of one origin reach the same
// server the same way.
std::string OriginOf(const std::string& url);

}  // namespace shardify::storage
