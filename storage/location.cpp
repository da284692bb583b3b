#include "storage/location.h"

#include <algorithm>
#include <cctype>

namespace shardify::storage {
namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// The scheme of `text` in lower case ("" when it has none).
std::string SchemeOf(const std::string& text) {
  const size_t colon = text.find("://");
  if (colon == std::string::npos || colon == 0) return "";
  const std::string scheme = text.substr(0, colon);
  const bool word = std::all_of(scheme.begin(), scheme.end(),
                                [](unsigned char c) { return std::isalnum(c) || c == '+' || c == '-' || c == '.'; });
  return word ? Lower(scheme) : "";
}

}  // namespace

bool IsRemote(const std::string& text) {
  const std::string scheme = SchemeOf(text);
  return scheme == "http" || scheme == "https";
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
  if (scheme != "http" && scheme != "https") {
    return Unsupported(text + ": location scheme '" + scheme +
                       "://' is not supported (http://, https:// or a directory)");
  }
  std::string rest = text.substr(scheme.size() + 3);
  if (rest.find_first_of("?#") != std::string::npos) {
    return InvalidArgument(text + ": a dataset URL takes no query or fragment (object names are appended to its path)");
  }
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  const size_t slash = rest.find('/');
  const std::string host = rest.substr(0, slash);
  if (host.empty() || host.find('@') != std::string::npos) {
    return InvalidArgument(text + ": a dataset URL needs a host (and no user name in it)");
  }
  at.kind = LocationKind::kHttp;
  at.base = scheme + "://" + rest;
  at.text = at.base;
  return at;
}

std::string ObjectUrl(const Location& at, const std::string& name) { return at.base + "/" + name; }

}  // namespace shardify::storage
