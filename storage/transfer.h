// Fetching objects over HTTP(S) with libcurl: bounded waits, retries with backoff, and
// errors that name the object.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace shardify::storage {

// AWS Signature Version 4 for requests to S3 and S3-compatible stores (libcurl signs
// them). Without an access key requests go unsigned (public buckets).
struct AwsSigning {
  std::string region = "us-east-1";
  std::string access_key;
  std::string secret_key;
  std::string session_token;  // temporary credentials' token, sent as x-amz-security-token
  bool on() const { return !access_key.empty(); }
};

// The limits left at 0 take their value from the environment when a transfer starts
// (ResolveTransferOptions), else the default in brackets.
struct TransferOptions {
  double connect_timeout_s = 0;  // to open a connection: $SHARDIFY_REMOTE_CONNECT_TIMEOUT [10 s]
  // A transfer that moves fewer than min_rate bytes a second for this long (whole seconds,
  // rounded up) is abandoned (a stalled or trickling server or network), and retried as a
  // failed one: $SHARDIFY_REMOTE_STALL_TIMEOUT [30 s]
  double stall_timeout_s = 0;
  uint64_t min_rate = 0;  // bytes a second, see stall_timeout_s: $SHARDIFY_REMOTE_MIN_RATE [1024]
  // How long a read waits for readers to release room in a full cache: $SHARDIFY_CACHE_WAIT [120 s]
  double cache_wait_s = 0;
  int attempts = 0;              // tries per object: $SHARDIFY_REMOTE_ATTEMPTS [5]
  double first_backoff_s = 0.5;  // wait before the second try; doubles each time, at most 8 s
  AwsSigning aws;                // S3 locations: how requests are signed
  // The certificate authorities https servers are checked against (a PEM file): ""
  // takes $AWS_CA_BUNDLE, else $CURL_CA_BUNDLE, else $SSL_CERT_FILE, else the system's
  // (a private endpoint with its own CA: MinIO, Ceph, a lab's server).
  std::string ca_bundle;
};

// `options` with each limit left at 0 set from its environment variable, else its default,
// and the CA bundle likewise. The one place those variables are read; every transfer below
// calls it. InvalidArgument naming the variable when its value is out of range (seconds:
// above 0, at most a day; attempts: a whole number from 1 to 100; a rate: a whole number
// of bytes from 1 to 1 GiB) or names no file, or listing the limits when one set in code
// is (negative, NaN, or past those bounds).
Result<TransferOptions> ResolveTransferOptions(TransferOptions options);

// True when this build has libcurl (remote datasets need it).
bool TransfersAvailable();

// The size a GET's body may have: exactly `bytes` (the size its manifest or the listing
// that named it gives: a body of another size is Corruption), or at most `bytes` (a cap: a
// larger body is an IOError). Either way a body past the bound, or whose Content-Length
// is past it, is refused before any byte past the bound is written.
struct SizeBound {
  uint64_t bytes = UINT64_MAX;
  bool exact = false;
  const char* from = "";  // exact: what gives the size, for errors ("its manifest")
  static SizeBound Exactly(uint64_t bytes, const char* from) { return {bytes, true, from}; }
  static SizeBound AtMost(uint64_t bytes) { return {bytes, false, ""}; }
};

// GETs `url` into a new file `path` (created, or truncated), its body within `size`.
// Retries connection failures, stalls, truncated bodies and HTTP 5xx/429; an HTTP 404 is
// NotFound, other 4xx a IOError, at once. On any error `path` is removed. Errors name the
// URL.
Status FetchToFile(const std::string& url, const std::string& path, SizeBound size, const TransferOptions& options);

// GETs `url` into memory; a body over `max_bytes` is an error (as SizeBound::AtMost).
Result<std::vector<uint8_t>> FetchToMemory(const std::string& url, uint64_t max_bytes, const TransferOptions& options);

// PUTs the file `path` as object `url` (a single PUT: S3 takes up to 5 GiB so), with the
// same retries as a GET. Errors name the URL.
Status PutFile(const std::string& url, const std::string& path, const TransferOptions& options);

// DELETEs object `url`, with the same retries; one that is not there is no error.
Status DeleteObject(const std::string& url, const TransferOptions& options);

// GETs bytes [offset, offset + size) of object `url` into `dst` (a range request), with the
// same retries. A server that answers with the whole object (no range support) or with
// another number of bytes is an IOError naming the URL.
Status FetchRange(const std::string& url, uint64_t offset, uint64_t size, void* dst, const TransferOptions& options);

}  // namespace shardify::storage
