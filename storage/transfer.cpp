#include "storage/transfer.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "base/file.h"
#include "base/strings.h"
#include "storage/location.h"

#ifdef SHARDIFY_HAVE_CURL
#include <curl/curl.h>
#endif

namespace shardify::storage {
namespace {

constexpr double kDay = 86400;  // the longest timeout taken, in seconds
constexpr int kMostAttempts = 100;
constexpr uint64_t kMostRate = 1ull << 30;  // bytes a second

// What an environment variable of a limit takes: a number in [low, high] (above low when
// `above`), whole when `whole`; `says` tells what, for errors.
struct LimitKind {
  double low, high;
  bool above, whole;
  const char* says;
};
constexpr LimitKind kSeconds{0, kDay, true, false, "a number of seconds above 0 and at most 86400"};
constexpr LimitKind kAttempts{1, kMostAttempts, false, true, "a whole number of attempts from 1 to 100"};
constexpr LimitKind kRate{1, static_cast<double>(kMostRate), false, true,
                          "a whole number of bytes a second from 1 to 1073741824"};

// Environment variable `name` as a limit of `kind`; `fallback` when it is unset or empty.
Result<double> EnvLimit(const char* name, double fallback, const LimitKind& kind) {
  const std::string text = EnvValue(name);
  if (text.empty()) return fallback;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  const bool in_range = (kind.above ? v > kind.low : v >= kind.low) && v <= kind.high &&
                        (!kind.whole || v == std::floor(v));  // false for NaN
  if (end != text.c_str() + text.size() || errno != 0 || !in_range) {
    return InvalidArgument(std::string(name) + "='" + text + "' is not " + kind.says);
  }
  return v;
}

}  // namespace

Result<TransferOptions> ResolveTransferOptions(TransferOptions o) {
  auto seconds = [](double s) { return s >= 0 && s <= kDay; };  // false for NaN
  if (!seconds(o.connect_timeout_s) || !seconds(o.stall_timeout_s) || !seconds(o.cache_wait_s) || o.attempts < 0 ||
      o.attempts > kMostAttempts || o.min_rate > kMostRate) {
    return InvalidArgument("transfer limits out of range (seconds from 0 to 86400, attempts from 0 to " +
                           std::to_string(kMostAttempts) + ", a rate from 0 to 1073741824 bytes a second; " +
                           "0 takes the default): connect_timeout_s " + std::to_string(o.connect_timeout_s) +
                           ", stall_timeout_s " + std::to_string(o.stall_timeout_s) + ", cache_wait_s " +
                           std::to_string(o.cache_wait_s) + ", attempts " + std::to_string(o.attempts) + ", min_rate " +
                           std::to_string(o.min_rate));
  }
  if (o.connect_timeout_s == 0) {
    ASSIGN_OR_RETURN(o.connect_timeout_s, EnvLimit("SHARDIFY_REMOTE_CONNECT_TIMEOUT", 10, kSeconds));
  }
  if (o.stall_timeout_s == 0) {
    ASSIGN_OR_RETURN(o.stall_timeout_s, EnvLimit("SHARDIFY_REMOTE_STALL_TIMEOUT", 30, kSeconds));
  }
  if (o.min_rate == 0) {
    ASSIGN_OR_RETURN(const double rate, EnvLimit("SHARDIFY_REMOTE_MIN_RATE", 1024, kRate));
    o.min_rate = static_cast<uint64_t>(rate);
  }
  if (o.cache_wait_s == 0) {
    ASSIGN_OR_RETURN(o.cache_wait_s, EnvLimit("SHARDIFY_CACHE_WAIT", 120, kSeconds));
  }
  if (o.attempts == 0) {
    ASSIGN_OR_RETURN(const double attempts, EnvLimit("SHARDIFY_REMOTE_ATTEMPTS", 5, kAttempts));
    o.attempts = static_cast<int>(attempts);
  }
  if (o.ca_bundle.empty()) {
    for (const char* name : {"AWS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE"}) {
      if (std::string path = EnvValue(name); !path.empty()) {
        if (!PathExists(path)) return InvalidArgument(std::string(name) + "='" + path + "': no such file");
        o.ca_bundle = std::move(path);
        break;
      }
    }
  } else if (!PathExists(o.ca_bundle)) {
    return InvalidArgument("CA bundle '" + o.ca_bundle + "': no such file");
  }
  return o;
}

#ifdef SHARDIFY_HAVE_CURL
namespace {

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

constexpr int kMostRedirects = 5;

// Where a body goes: a file or a buffer, within a SizeBound.
struct Sink {
  std::FILE* file = nullptr;
  std::vector<uint8_t>* buffer = nullptr;
  uint8_t* into = nullptr;  // bound.bytes bytes of the caller's
  SizeBound bound;
  uint64_t received = 0;
  uint64_t announced = 0;  // the Content-Length that was past the bound (0: none was)
  bool over_limit = false;
  bool write_failed = false;
  CURL* curl = nullptr;  // the transfer, asked for the answer's status
};

size_t Write(char* data, size_t size, size_t count, void* user) {
  Sink& s = *static_cast<Sink*>(user);
  const size_t n = size * count;
  long status = 0;
  curl_easy_getinfo(s.curl, CURLINFO_RESPONSE_CODE, &status);
  if (status >= 300 && status < 400) return n;  // a redirect's page, not the object
  curl_off_t length = -1;
  if (s.received == 0 && curl_easy_getinfo(s.curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length) == CURLE_OK &&
      length > 0 && static_cast<uint64_t>(length) > s.bound.bytes) {
    s.announced = static_cast<uint64_t>(length);  // refused before a byte is written
    s.over_limit = true;
    return 0;
  }
  if (s.received + n > s.bound.bytes) {
    s.over_limit = true;
    return 0;  // libcurl stops with CURLE_WRITE_ERROR
  }
  if (s.file != nullptr && std::fwrite(data, 1, n, s.file) != n) {
    s.write_failed = true;
    return 0;
  }
  if (s.buffer != nullptr) s.buffer->insert(s.buffer->end(), data, data + n);
  if (s.into != nullptr) std::memcpy(s.into + s.received, data, n);  // within the bound: checked above
  s.received += n;
  return n;
}

struct Outcome {
  Status status;
  bool retry = false;
};

// A file sent as a request's body (PUT).
struct Body {
  std::FILE* file = nullptr;
  uint64_t size = 0;
};

size_t Read(char* data, size_t size, size_t count, void* user) {
  Body& b = *static_cast<Body*>(user);
  const size_t n = std::fread(data, 1, size * count, b.file);
  return std::ferror(b.file) ? CURL_READFUNC_ABORT : n;
}

// The options of every request: no redirects followed by libcurl (Perform follows those
// it may), limits, certificates, http(s) only.
void SetCommonOptions(CURL* curl, const TransferOptions& o) {
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(o.connect_timeout_s * 1000));
  // Slower than min_rate bytes a second for stall_timeout_s (no byte at all included).
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, static_cast<long>(o.min_rate));
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, static_cast<long>(std::ceil(o.stall_timeout_s)));
  if (!o.ca_bundle.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, o.ca_bundle.c_str());
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
}

// Why the request for `url` may not follow its redirect to `target` ("" when it may): a
// read (GET) follows one within its scheme, host and port, at most kMostRedirects times.
std::string RedirectRefusal(const std::string& url, const std::string& target, bool read, int hops) {
  if (!read) return "a PUT or DELETE is not redirected";
  if (OriginOf(target).empty() || OriginOf(target) != OriginOf(url)) {
    return "another scheme, host or port: a redirect is followed only within the same scheme, host and port";
  }
  if (hops >= kMostRedirects) return "more than " + std::to_string(kMostRedirects) + " redirects";
  return "";
}

// Performs the request set up on `curl` for `url`, then again for each redirect it may
// follow (RedirectRefusal: `read` for a GET); a redirect it may not follow ends it, with
// *refusal the error's message.
CURLcode PerformFollowing(CURL* curl, const std::string& url, bool read, std::string* refusal) {
  for (int hops = 0;; ++hops) {
    const CURLcode rc = curl_easy_perform(curl);
    long http = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &http);
    const char* target = nullptr;
    if (rc != CURLE_OK || http < 300 || http >= 400 ||
        curl_easy_getinfo(curl, CURLINFO_REDIRECT_URL, &target) != CURLE_OK || target == nullptr) {
      return rc;
    }
    const std::string next = target;
    if (const std::string why = RedirectRefusal(url, next, read, hops); !why.empty()) {
      *refusal = ShownLocation(url) + ": redirected to " + ShownLocation(next) + " (" + why + ")";
      return rc;
    }
    curl_easy_setopt(curl, CURLOPT_URL, next.c_str());
  }
}

// What came back from one request.
struct Answer {
  CURLcode rc = CURLE_OK;
  const char* error = "";  // libcurl's message, "" when none
  long http = 0;
  curl_off_t length = -1;  // the body's Content-Length; -1 when not given
  curl_off_t sent = 0;     // bytes of the request's body sent
  bool connected = false;  // so a timeout is the speed check's (no overall timeout is set)
};

// The error of a transfer abandoned by the speed check (min_rate for stall_timeout_s).
Status TooSlow(const std::string& shown, const Answer& a, const Sink& sink, const TransferOptions& o, bool upload) {
  const std::string of = a.length >= 0 && !upload ? " of " + std::to_string(a.length) : "";
  const std::string moved =
      upload ? std::to_string(a.sent) + " bytes sent" : std::to_string(sink.received) + of + " bytes received";
  return IOError(shown + ": slower than " + std::to_string(o.min_rate) + " bytes a second for " +
                 std::to_string(static_cast<long>(std::ceil(o.stall_timeout_s))) + " s (" + moved +
                 "; SHARDIFY_REMOTE_MIN_RATE and SHARDIFY_REMOTE_STALL_TIMEOUT set these limits)");
}

// The error of a body past its bound.
Status TooLarge(const std::string& shown, const Sink& sink) {
  const std::string larger = shown + ": the object is larger than " + std::to_string(sink.bound.bytes) + " bytes";
  const std::string says =
      sink.announced == 0 ? "" : " (the answer's Content-Length is " + std::to_string(sink.announced) + ")";
  if (sink.bound.exact) return Corruption(larger + ", the size " + sink.bound.from + " says" + says);
  return IOError(larger + ", the most this read takes" + says);
}

// What an answer means: ok, an error naming `shown` (the URL as ShownLocation shows it),
// and whether to try again.
Outcome Judge(const std::string& shown, const Answer& a, const Sink& sink, const TransferOptions& o, bool upload,
              bool range) {
  const long http = a.http;
  if (range && http == 200) {
    return {
        IOError(shown + ": the server does not serve byte ranges (it answered a range request with the whole object)"),
        false};
  }
  // An error page longer than the body expected (a small range) is reported by its status.
  const bool error_page = sink.over_limit && http >= 300;
  if (sink.over_limit && !error_page) return {TooLarge(shown, sink), false};
  if (sink.write_failed) return {IOError(shown + ": cannot write what was received to the local file"), false};
  if (a.rc == CURLE_OPERATION_TIMEDOUT && a.connected && !error_page) {
    return {TooSlow(shown, a, sink, o, upload), true};
  }
  if (a.rc != CURLE_OK && !error_page) {
    const std::string why = a.error[0] != '\0' ? a.error : curl_easy_strerror(a.rc);
    const CURLcode rc = a.rc;
    const bool transient = rc == CURLE_OPERATION_TIMEDOUT || rc == CURLE_COULDNT_CONNECT || rc == CURLE_RECV_ERROR ||
                           rc == CURLE_SEND_ERROR || rc == CURLE_PARTIAL_FILE || rc == CURLE_GOT_NOTHING ||
                           rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_SSL_CONNECT_ERROR || rc == CURLE_HTTP2 ||
                           rc == CURLE_HTTP2_STREAM;
    return {IOError(shown + ": " + why), transient};
  }
  if (http == 404) return {NotFound(shown + ": no such object (HTTP 404)"), false};
  if (http == 401 || http == 403) {
    const std::string hint = o.aws.on() ? " with the credentials of access key " + o.aws.access_key +
                                              " (AWS_ACCESS_KEY_ID, AWS_PROFILE, ~/.aws/credentials)"
                                        : "";
    return {IOError(shown + ": access refused (HTTP " + std::to_string(http) + ")" + hint), false};
  }
  const std::string answered = shown + ": the server answered HTTP " + std::to_string(http);
  if (http >= 500 || http == 429 || http == 408) return {IOError(answered), true};
  if (http < 200 || http >= 300) return {IOError(answered), false};
  if (!upload && a.length >= 0 && static_cast<uint64_t>(a.length) != sink.received) {
    return {
        IOError(shown + ": received " + std::to_string(sink.received) + " of " + std::to_string(a.length) + " bytes"),
        true};
  }
  return {Status::Ok(), false};
}

// One request: a GET of `url` into `sink` (of bytes `range`, "first-last", when given),
// or with `body` a PUT of it, or with `method` that request without a body (DELETE); the
// answer's body goes into `sink`. A GET follows the redirects RedirectRefusal allows;
// any other redirect is an error naming where it pointed.
Outcome Perform(const std::string& url, Sink& sink, const TransferOptions& o, Body* body = nullptr,
                const char* method = nullptr, const char* range = nullptr) {
  const std::string shown = ShownLocation(url);
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return {IOError(shown + ": cannot start a transfer (curl_easy_init)"), false};
  char error[CURL_ERROR_SIZE] = {0};
  sink.curl = curl;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, Write);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
  SetCommonOptions(curl, o);
  if (body != nullptr) {
    curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(curl, CURLOPT_READFUNCTION, Read);
    curl_easy_setopt(curl, CURLOPT_READDATA, body);
    curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(body->size));
    // No 100-continue round trip. (Removing the header with "Expect:" instead would leave
    // it among the headers libcurl signs, and the signature would not match.)
    curl_easy_setopt(curl, CURLOPT_EXPECT_100_TIMEOUT_MS, 0L);
  }
  if (method != nullptr) curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
  if (range != nullptr) curl_easy_setopt(curl, CURLOPT_RANGE, range);
  curl_slist* headers = nullptr;
  const std::string provider = "aws:amz:" + o.aws.region + ":s3";
  const std::string token = "x-amz-security-token: " + o.aws.session_token;
  if (o.aws.on()) {  // libcurl signs each request for its own URL, a redirect's included
    curl_easy_setopt(curl, CURLOPT_AWS_SIGV4, provider.c_str());
    curl_easy_setopt(curl, CURLOPT_USERNAME, o.aws.access_key.c_str());
    curl_easy_setopt(curl, CURLOPT_PASSWORD, o.aws.secret_key.c_str());
    headers = curl_slist_append(headers, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
    if (!o.aws.session_token.empty()) headers = curl_slist_append(headers, token.c_str());
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  std::string refusal;
  Answer a;
  a.rc = PerformFollowing(curl, url, body == nullptr && method == nullptr, &refusal);
  a.error = error;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &a.http);
  curl_easy_getinfo(curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &a.length);
  curl_easy_getinfo(curl, CURLINFO_SIZE_UPLOAD_T, &a.sent);
  curl_off_t connect_us = 0;
  a.connected = curl_easy_getinfo(curl, CURLINFO_CONNECT_TIME_T, &connect_us) == CURLE_OK && connect_us > 0;
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  if (!refusal.empty()) return {IOError(refusal), false};
  return Judge(shown, a, sink, o, body != nullptr, range != nullptr);
}

// Runs `attempt` with `options` resolved (ResolveTransferOptions) up to their attempts
// times while it fails transiently, backing off between.
template <typename F>
Status WithRetries(const TransferOptions& options, F attempt) {
  ASSIGN_OR_RETURN(const TransferOptions o, ResolveTransferOptions(options));
  double wait = o.first_backoff_s;
  Status last;
  const int attempts = o.attempts;
  for (int k = 1; k <= attempts; ++k) {
    const Outcome out = attempt(o);
    if (out.status.ok() || !out.retry) return out.status;
    last = out.status;
    if (k == attempts) break;
    std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    wait = std::min(wait * 2, 8.0);
  }
  return Status(last.code(),
                last.message() + " (after " + std::to_string(attempts) + (attempts == 1 ? " attempt)" : " attempts)"));
}

}  // namespace

bool TransfersAvailable() { return true; }

Status FetchToFile(const std::string& url, const std::string& path, SizeBound size, const TransferOptions& options) {
  GlobalInit();
  const Status st = WithRetries(options, [&](const TransferOptions& o) -> Outcome {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) return {IOError(path + ": cannot create the file for " + ShownLocation(url)), false};
    Sink sink;
    sink.file = f;
    sink.bound = size;
    Outcome out = Perform(url, sink, o);
    if (std::fclose(f) != 0 && out.status.ok()) {
      out = {IOError(path + ": cannot write the file for " + ShownLocation(url)), false};
    }
    if (out.status.ok() && size.exact && sink.received != size.bytes) {
      out = {Corruption(ShownLocation(url) + ": the object is " + std::to_string(sink.received) + " bytes, " +
                        size.from + " says " + std::to_string(size.bytes)),
             false};
    }
    return out;
  });
  if (!st.ok()) RemoveFile(path).IgnoreError();
  return st;
}

Result<std::vector<uint8_t>> FetchToMemory(const std::string& url, uint64_t max_bytes, const TransferOptions& options) {
  GlobalInit();
  std::vector<uint8_t> body;
  RETURN_IF_ERROR(WithRetries(options, [&](const TransferOptions& o) -> Outcome {
    body.clear();
    Sink sink;
    sink.buffer = &body;
    sink.bound = SizeBound::AtMost(max_bytes);
    return Perform(url, sink, o);
  }));
  return body;
}

Status PutFile(const std::string& url, const std::string& path, const TransferOptions& options) {
  GlobalInit();
  ASSIGN_OR_RETURN(const uint64_t size, FileSize(path));
  return WithRetries(options, [&](const TransferOptions& o) -> Outcome {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) return {IOError(path + ": cannot open the file to send to " + ShownLocation(url)), false};
    Body body{f, size};
    std::vector<uint8_t> answer;
    Sink sink;
    sink.buffer = &answer;
    sink.bound = SizeBound::AtMost(1 << 20);
    Outcome out = Perform(url, sink, o, &body);
    std::fclose(f);
    if (out.status.code() == StatusCode::kNotFound) {  // no bucket to put into
      out.status = NotFound(ShownLocation(url) + ": the bucket does not exist (HTTP 404)");
    }
    return out;
  });
}

Status DeleteObject(const std::string& url, const TransferOptions& options) {
  GlobalInit();
  return WithRetries(options, [&](const TransferOptions& o) -> Outcome {
    std::vector<uint8_t> answer;
    Sink sink;
    sink.buffer = &answer;
    sink.bound = SizeBound::AtMost(1 << 20);
    Outcome out = Perform(url, sink, o, nullptr, "DELETE");
    if (out.status.code() == StatusCode::kNotFound) out.status = Status::Ok();  // gone already
    return out;
  });
}

Status FetchRange(const std::string& url, uint64_t offset, uint64_t size, void* dst, const TransferOptions& options) {
  if (size == 0) return Status::Ok();
  GlobalInit();
  const std::string range = std::to_string(offset) + "-" + std::to_string(offset + size - 1);
  return WithRetries(options, [&](const TransferOptions& o) -> Outcome {
    Sink sink;
    sink.into = static_cast<uint8_t*>(dst);
    sink.bound = SizeBound::AtMost(size);
    Outcome out = Perform(url, sink, o, nullptr, nullptr, range.c_str());
    if (out.status.ok() && sink.received != size) {
      out = {IOError(ShownLocation(url) + ": bytes " + range + " came as " + std::to_string(sink.received) + " bytes"),
             true};
    }
    return out;
  });
}

#else  // without libcurl

bool TransfersAvailable() { return false; }

Status FetchToFile(const std::string& url, const std::string&, SizeBound, const TransferOptions&) {
  return Unsupported(ShownLocation(url) + ": this build has no libcurl, so no remote datasets");
}

Result<std::vector<uint8_t>> FetchToMemory(const std::string& url, uint64_t, const TransferOptions&) {
  return Unsupported(ShownLocation(url) + ": this build has no libcurl, so no remote datasets");
}

Status PutFile(const std::string& url, const std::string&, const TransferOptions&) {
  return Unsupported(ShownLocation(url) + ": this build has no libcurl, so no remote datasets");
}

Status DeleteObject(const std::string& url, const TransferOptions&) {
  return Unsupported(ShownLocation(url) + ": this build has no libcurl, so no remote datasets");
}

Status FetchRange(const std::string& url, uint64_t, uint64_t, void*, const TransferOptions&) {
  return Unsupported(ShownLocation(url) + ": this build has no libcurl, so no remote datasets");
}

#endif

}  // namespace shardify::storage
