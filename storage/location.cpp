#include "storage/location.h"

#include <algorithm>
#include <cctype>

#include "base/strings.h"

namespace shardify::storage {
namespace {

// The scheme of `text` in lower case ("" when it has none).
std::string SchemeOf(const std::string& text) {
  const size_t colon = text.find("://");
  if (colon == std::string::npos || colon == 0) return "";
  const std::string scheme = text.substr(0, colon);
  const bool word = std::all_of(scheme.begin(), scheme.end(),
                                [](unsigned char c) { return std::isalnum(c) || c == '+' || c == '-' || c == '.'; });
  return word ? AsciiLower(scheme) : "";
}

// S3's rules for bucket names: 3-63 characters, lower-case letters, digits, '-' and '.',
// beginning and ending with a letter or digit.
bool ValidBucket(const std::string& b) {
  if (b.size() < 3 || b.size() > 63) return false;
  auto alnum = [](unsigned char c) { return std::islower(c) || std::isdigit(c); };
  if (!alnum(b.front()) || !alnum(b.back())) return false;
  return std::all_of(b.begin(), b.end(), [&](unsigned char c) { return alnum(c) || c == '-' || c == '.'; });
}

Result<Location> ParseS3(const std::string& text) {
  std::string rest = text.substr(5);
  if (rest.find_first_of("?#") != std::string::npos) {
    return InvalidArgument(ShownLocation(text) + ": an s3:// location takes no query or fragment");
  }
  const size_t slash = rest.find('/');
  Location at;
  at.kind = LocationKind::kS3;
  at.bucket = rest.substr(0, slash);
  if (!ValidBucket(at.bucket)) {
    return InvalidArgument(ShownLocation(text) + ": '" + at.bucket +
                           "' is not an S3 bucket name (3-63 lower-case letters, digits, '-' and '.')");
  }
  if (slash != std::string::npos) at.prefix = rest.substr(slash + 1);
  while (!at.prefix.empty() && at.prefix.back() == '/') at.prefix.pop_back();
  if (at.prefix.find("//") != std::string::npos || (!at.prefix.empty() && at.prefix.front() == '/')) {
    return InvalidArgument(ShownLocation(text) + ": an empty folder in the key prefix ('//')");
  }
  at.text = "s3://" + at.bucket + (at.prefix.empty() ? "" : "/" + at.prefix);
  return at;
}

}  // namespace

bool IsRemote(const std::string& text) {
  const std::string scheme = SchemeOf(text);
  return scheme == "http" || scheme == "https" || scheme == "s3";
}

Result<Location> ParseLocation(const std::string& text) {
  if (text.empty()) return InvalidArgument("dataset location is empty");
  Location at;
  at.text = text;
  const std::string scheme = SchemeOf(text);
  if (scheme.empty()) {
    while (at.text.size() > 1 && at.text.back() == '/') at.text.pop_back();
    return at;
  }
  if (scheme == "s3") return ParseS3(text);
  if (scheme != "http" && scheme != "https") {
    return Unsupported(ShownLocation(text) + ": location scheme '" + scheme +
                       "://' is not supported (s3://, http://, https:// or a directory)");
  }
  std::string rest = text.substr(scheme.size() + 3);
  if (rest.find('#') != std::string::npos) {
    return InvalidArgument(ShownLocation(text) +
                           ": a dataset URL takes no fragment (object names are appended to its path)");
  }
  if (const size_t q = rest.find('?'); q != std::string::npos) {
    at.query = rest.substr(q);
    rest.resize(q);
    if (at.query == "?") at.query.clear();
  }
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  const size_t slash = rest.find('/');
  const std::string host = rest.substr(0, slash);
  if (host.empty() || host.find('@') != std::string::npos) {
    return InvalidArgument(ShownLocation(text) + ": a dataset URL needs a host (and no user name in it)");
  }
  at.kind = LocationKind::kHttp;
  at.base = scheme + "://" + rest;
  at.text = ShownLocation(at.base + at.query);
  return at;
}

std::string ReadableName(const std::string& text) {
  const size_t scheme = text.find("://");
  std::string readable;
  for (char c : text.substr(scheme == std::string::npos ? 0 : scheme + 3)) {
    readable += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' ? c : '_';
  }
  return readable.size() > 80 ? readable.substr(readable.size() - 80) : readable;
}

std::string ObjectUrl(const Location& at, const std::string& name) {
  return at.base + "/" + PercentEncode(name, true) + at.query;
}

std::string PercentEncode(const std::string& text, bool keep_slashes) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || (c == '/' && keep_slashes)) {
      out += static_cast<char>(c);
    } else {
      static const char kHex[] = "0123456789ABCDEF";
      out += {'%', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
}

std::string ShownLocation(const std::string& location) {
  if (SchemeOf(location).empty()) return location;
  std::string shown = location;
  if (const size_t q = shown.find('?'); q != std::string::npos && q + 1 < shown.size()) {
    shown.replace(q, std::string::npos, "?...");
  }
  const size_t host = shown.find("://") + 3;
  const size_t at = shown.find('@', host);
  if (at != std::string::npos && at < shown.find_first_of("/?#", host)) shown.replace(host, at - host, "...");
  return shown;
}

std::string OriginOf(const std::string& url) {
  const std::string scheme = SchemeOf(url);
  if (scheme != "http" && scheme != "https") return "";
  const size_t begin = scheme.size() + 3;
  std::string authority = url.substr(begin, url.find_first_of("/?#", begin) - begin);
  if (const size_t at = authority.rfind('@'); at != std::string::npos) authority.erase(0, at + 1);
  const size_t colon = authority.rfind(':');
  const bool port_given = colon != std::string::npos && authority.find(']', colon) == std::string::npos;
  const std::string host = AsciiLower(port_given ? authority.substr(0, colon) : authority);
  std::string port = port_given ? authority.substr(colon + 1) : "";
  if (port.empty()) port = scheme == "https" ? "443" : "80";
  return host.empty() ? "" : scheme + "://" + host + ":" + port;
}

}  // namespace shardify::storage
