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
  // A transfer that moves no byte for this long (whole seconds, rounded up) is abandoned (a
  // stalled server or network), and retried as a failed one: $SHARDIFY_REMOTE_STALL_TIMEOUT [30 s]
  double stall_timeout_s = 0;
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
// above 0, at most a day; attempts: a whole number from 1 to 100) or names no file, or
// listing the limits when one set in code is (negative, NaN, or past those bounds).
Result<TransferOptions> ResolveTransferOptions(TransferOptions options);

// True when this build has libcurl (remote datasets need it).
bool TransfersAvailable();

// GETs `url` into a new file `path` (created, or truncated). Retries connection failures,
// stalls, truncated bodies and HTTP 5xx/429; an HTTP 404 is NotFound, other 4xx a
// IOError, at once. `expected_size` (when not UINT64_MAX) must be the
// body's size. On any error `path` is removed. Errors name the URL.
Status FetchToFile(const std::string& url, const std::string& path, uint64_t expected_size,
                   const TransferOptions& options);

// GETs `url` into memory; a body over `max_bytes` is an error.
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
