#include "storage/s3.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <map>

#include "base/file.h"
#include "base/strings.h"
#include "storage/location.h"

namespace shardify::storage {
namespace {

std::string FirstEnv(std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (std::string v = EnvValue(n); !v.empty()) return v;
  }
  return "";
}

std::string Trimmed(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// An INI file of the AWS tools: section -> key -> value (keys in lower case). A missing
// file is an empty one.
using Ini = std::map<std::string, std::map<std::string, std::string>>;

Ini ReadIni(const std::string& path) {
  Ini ini;
  std::ifstream in(path);
  std::string line, section;
  while (std::getline(in, line)) {
    line = Trimmed(line);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      section = Trimmed(line.substr(1, line.size() - 2));
      continue;
    }
    const size_t eq = line.find('=');
    if (eq == std::string::npos || section.empty()) continue;
    ini[section][AsciiLower(Trimmed(line.substr(0, eq)))] = Trimmed(line.substr(eq + 1));
  }
  return ini;
}

std::string AwsFile(const char* variable, const char* name) {
  if (std::string path = EnvValue(variable); !path.empty()) return path;
  const std::string home = EnvValue("HOME");
  return home.empty() ? "" : JoinPath(home, std::string(".aws/") + name);
}

std::string Lookup(const Ini& ini, const std::string& section, const std::string& key) {
  auto s = ini.find(section);
  if (s == ini.end()) return "";
  auto k = s->second.find(key);
  return k == s->second.end() ? "" : k->second;
}

// scheme://host[:port] from an endpoint as given (a trailing slash allowed, no path).
Result<std::string> Endpoint(std::string e, const std::string& from) {
  while (!e.empty() && e.back() == '/') e.pop_back();
  const size_t colon = e.find("://");
  const std::string scheme = AsciiLower(colon == std::string::npos ? "" : e.substr(0, colon));
  const std::string host = colon == std::string::npos ? "" : e.substr(colon + 3);
  if ((scheme != "http" && scheme != "https") || host.empty() || host.find_first_of("/?#@") != std::string::npos) {
    return InvalidArgument(from + " '" + e + "' is not an endpoint (http[s]://host[:port])");
  }
  return scheme + "://" + host;
}

// The text of an XML element with its entities decoded (the five named ones and
// numeric ones below 128; others are refused: S3 keys of datasets are ASCII).
Result<std::string> XmlText(const std::string& raw) {
  std::string out;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != '&') {
      out += raw[i];
      continue;
    }
    const size_t end = raw.find(';', i);
    if (end == std::string::npos || end - i > 8) return Corruption("an S3 listing has a bad entity in '" + raw + "'");
    const std::string name = raw.substr(i + 1, end - i - 1);
    static const std::map<std::string, char> kNamed = {
        {"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
    if (auto it = kNamed.find(name); it != kNamed.end()) {
      out += it->second;
    } else if (name.size() >= 2 && name[0] == '#') {
      const bool hex = name[1] == 'x' || name[1] == 'X';
      const std::string digits = name.substr(hex ? 2 : 1);
      char* stop = nullptr;
      const long code = digits.empty() ? -1 : std::strtol(digits.c_str(), &stop, hex ? 16 : 10);
      if (code <= 0 || code >= 128 || *stop != '\0') {
        return Corruption("an S3 listing has an entity this reader does not take: &" + name + ";");
      }
      out += static_cast<char>(code);
    } else {
      return Corruption("an S3 listing has an unknown entity &" + name + ";");
    }
    i = end;
  }
  return out;
}

// The raw text of every <tag>...</tag> in `xml` (elements in it included), in order.
Result<std::vector<std::string>> Blocks(const std::string& xml, const std::string& tag) {
  const std::string open = "<" + tag + ">", close = "</" + tag + ">";
  std::vector<std::string> out;
  for (size_t at = xml.find(open); at != std::string::npos; at = xml.find(open, at)) {
    const size_t begin = at + open.size();
    const size_t end = xml.find(close, begin);
    if (end == std::string::npos || xml.find(open, begin) < end) {
      return Corruption("an S3 listing has a <" + tag + "> that does not close");
    }
    out.push_back(xml.substr(begin, end - begin));
    at = end + close.size();
  }
  return out;
}

// `text` as a number of up to 19 decimal digits (no sign, no space).
bool Decimal(const std::string& text, uint64_t* out) {
  if (text.empty() || text.size() > 19) return false;
  uint64_t v = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return true;
}

// The text of every <tag>...</tag> in `xml`, in order: Blocks that hold no element.
Result<std::vector<std::string>> Elements(const std::string& xml, const std::string& tag) {
  ASSIGN_OR_RETURN(std::vector<std::string> out, Blocks(xml, tag));
  for (std::string& block : out) {
    if (block.find('<') != std::string::npos) {
      return Corruption("an S3 listing has a <" + tag + "> that does not close");
    }
    ASSIGN_OR_RETURN(block, XmlText(block));
  }
  return out;
}

}  // namespace

Result<S3Settings> S3SettingsFromEnvironment() {
  S3Settings s;
  const std::string profile = FirstEnv({"AWS_PROFILE", "AWS_DEFAULT_PROFILE"});
  const std::string name = profile.empty() ? "default" : profile;
  const std::string credentials_file = AwsFile("AWS_SHARED_CREDENTIALS_FILE", "credentials");
  const std::string config_file = AwsFile("AWS_CONFIG_FILE", "config");
  const Ini credentials = credentials_file.empty() ? Ini() : ReadIni(credentials_file);
  const Ini config = config_file.empty() ? Ini() : ReadIni(config_file);
  const std::string config_section = name == "default" ? "default" : "profile " + name;

  AwsSigning& a = s.signing;
  a.access_key = EnvValue("AWS_ACCESS_KEY_ID");
  a.secret_key = EnvValue("AWS_SECRET_ACCESS_KEY");
  if (!a.access_key.empty() || !a.secret_key.empty()) {
    if (a.access_key.empty() || a.secret_key.empty()) {
      return InvalidArgument("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY go together; only one is set");
    }
    a.session_token = EnvValue("AWS_SESSION_TOKEN");
    s.credentials_from = "AWS_ACCESS_KEY_ID";
  } else {
    a.access_key = Lookup(credentials, name, "aws_access_key_id");
    a.secret_key = Lookup(credentials, name, "aws_secret_access_key");
    a.session_token = Lookup(credentials, name, "aws_session_token");
    if (a.access_key.empty()) {  // the config file may hold credentials too
      a.access_key = Lookup(config, config_section, "aws_access_key_id");
      a.secret_key = Lookup(config, config_section, "aws_secret_access_key");
      a.session_token = Lookup(config, config_section, "aws_session_token");
    }
    if (!a.access_key.empty() && a.secret_key.empty()) {
      return InvalidArgument("profile '" + name + "' has aws_access_key_id but no aws_secret_access_key (" +
                             credentials_file + ")");
    }
    if (!a.access_key.empty()) s.credentials_from = "profile " + name;
    if (a.access_key.empty() && !profile.empty() && credentials.count(name) == 0 && config.count(config_section) == 0) {
      return InvalidArgument("AWS_PROFILE names profile '" + name + "', which neither " + credentials_file + " nor " +
                             config_file + " has");
    }
  }
  a.region = FirstEnv({"AWS_REGION", "AWS_DEFAULT_REGION"});
  if (a.region.empty()) a.region = Lookup(config, config_section, "region");
  if (a.region.empty()) a.region = "us-east-1";

  std::string endpoint = FirstEnv({"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"});
  std::string from = "AWS_ENDPOINT_URL";
  if (endpoint.empty()) {
    endpoint = Lookup(config, config_section, "endpoint_url");
    from = "endpoint_url of profile " + name;
  }
  const bool aws = endpoint.empty();
  if (aws) endpoint = "https://s3." + a.region + ".amazonaws.com";
  ASSIGN_OR_RETURN(s.endpoint, Endpoint(endpoint, from));

  const std::string addressing = EnvValue("SHARDIFY_S3_ADDRESSING");
  if (addressing == "path") {
    s.addressing = S3Addressing::kPath;
  } else if (addressing == "virtual") {
    s.addressing = S3Addressing::kVirtualHost;
  } else if (addressing.empty()) {
    s.addressing = aws ? S3Addressing::kVirtualHost : S3Addressing::kPath;
  } else {
    return InvalidArgument("SHARDIFY_S3_ADDRESSING is '" + addressing + "'; it takes 'path' or 'virtual'");
  }
  return s;
}

std::string S3PrefixUrl(const S3Settings& s, const std::string& bucket, const std::string& prefix) {
  const std::string path = PercentEncode(prefix, true);
  const std::string tail = path.empty() ? "" : "/" + path;
  if (s.addressing == S3Addressing::kPath) return s.endpoint + "/" + bucket + tail;
  const size_t host = s.endpoint.find("://") + 3;
  return s.endpoint.substr(0, host) + bucket + "." + s.endpoint.substr(host) + tail;
}

Result<S3Listing> ParseS3Listing(const std::string& xml) {
  if (xml.find("<ListBucketResult") == std::string::npos) {
    return Corruption("the answer to an S3 listing is not a ListBucketResult: '" + xml.substr(0, 120) + "'");
  }
  S3Listing page;
  ASSIGN_OR_RETURN(const std::vector<std::string> contents, Blocks(xml, "Contents"));
  for (const std::string& block : contents) {
    ASSIGN_OR_RETURN(const std::vector<std::string> key, Elements(block, "Key"));
    ASSIGN_OR_RETURN(const std::vector<std::string> size, Elements(block, "Size"));
    uint64_t bytes = 0;
    if (key.size() != 1 || size.size() != 1 || !Decimal(size[0], &bytes)) {
      return Corruption("an S3 listing has a <Contents> without one <Key> and one <Size> in bytes: '" +
                        block.substr(0, 120) + "'");
    }
    page.objects.push_back({key[0], bytes});
  }
  ASSIGN_OR_RETURN(const std::vector<std::string> truncated, Elements(xml, "IsTruncated"));
  ASSIGN_OR_RETURN(const std::vector<std::string> token, Elements(xml, "NextContinuationToken"));
  if (truncated.size() > 1 || token.size() > 1) return Corruption("an S3 listing says twice whether it goes on");
  page.truncated = !truncated.empty() && truncated[0] == "true";
  if (page.truncated) {
    if (token.empty() || token[0].empty()) return Corruption("an S3 listing goes on but gives no continuation token");
    page.next_token = token[0];
  }
  return page;
}

}  // namespace shardify::storage
