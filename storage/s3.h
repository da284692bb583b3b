// S3 and S3-compatible object stores (MinIO, Ceph, Swift, GCS's S3 API): where a bucket's
// objects are reached, and the credentials that sign requests to them, from the variables
// and files the AWS tools read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "storage/transfer.h"

namespace shardify::storage {

enum class S3Addressing { kPath, kVirtualHost };

struct S3Settings {
  std::string endpoint;  // scheme://host[:port], no trailing slash
  S3Addressing addressing = S3Addressing::kVirtualHost;
  AwsSigning signing;            // region and credentials; no access key: unsigned requests
  std::string credentials_from;  // where the credentials came from, for messages ("" when none)
};

// The settings the AWS tools would use:
// - credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (with AWS_SESSION_TOKEN);
//   else profile $AWS_PROFILE (default "default") of $AWS_SHARED_CREDENTIALS_FILE (default
//   ~/.aws/credentials); else none, and requests go unsigned (public buckets).
// - region: AWS_REGION, AWS_DEFAULT_REGION, the profile's `region` in $AWS_CONFIG_FILE
//   (default ~/.aws/config), else us-east-1.
// - endpoint: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's `endpoint_url`, else
//   AWS's https://s3.<region>.amazonaws.com.
// - addressing: SHARDIFY_S3_ADDRESSING ("path" or "virtual"); by default virtual-host
//   (bucket.host) on AWS's endpoint and path-style (host/bucket) on any other.
// Errors: a key without its secret, a malformed endpoint or addressing, a named profile
// that no file has.
Result<S3Settings> S3SettingsFromEnvironment();

// The URL of `prefix` in `bucket` ("" prefix: the bucket's root), without a trailing
// slash; the prefix PercentEncode'd (storage/location.h) with its slashes kept.
std::string S3PrefixUrl(const S3Settings& s, const std::string& bucket, const std::string& prefix);

// An object a listing names: its key (from ObjectStore::List, its name under the
// location) and its size in bytes.
struct ListedObject {
  std::string name;
  uint64_t size = 0;
  bool operator==(const ListedObject& o) const { return name == o.name && size == o.size; }
};

// One page of a ListObjectsV2 answer.
struct S3Listing {
  std::vector<ListedObject> objects;  // each <Contents>'s <Key> (entities decoded) and <Size>, in order
  bool truncated = false;             // <IsTruncated>true: ask again with next_token
  std::string next_token;             // <NextContinuationToken>
};

// Reads a ListObjectsV2 answer (untrusted bytes: anything that is not such a listing is
// Corruption, a <Contents> without one <Key> and one <Size> of decimal digits included).
// Only the elements above are read. The keys are as the store wrote them:
// whether each is a name under the prefix asked for is the caller's to check
// (ObjectStore::List does).
Result<S3Listing> ParseS3Listing(const std::string& xml);

}  // namespace shardify::storage
