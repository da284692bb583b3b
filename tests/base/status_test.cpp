#include "base/status.h"

#include <catch2/catch.hpp>

using namespace shardify;

namespace {
Result<int> Half(int x) {
  if (x % 2) return InvalidArgument(std::to_string(x) + " is odd");
  return x / 2;
}
Result<int> Quarter(int x) {
  ASSIGN_OR_RETURN(int h, Half(x));
  ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}
Status CheckEven(int x) {
  RETURN_IF_ERROR(Half(x).status());
  return Status::Ok();
}
}  // namespace

TEST_CASE("base: Status carries code and message") {
  Status ok;
  CHECK(ok.ok());
  CHECK(ok.ToString() == "ok");
  Status bad = Corruption("shard-00000.sfs: bad tail magic");
  CHECK_FALSE(bad.ok());
  CHECK(bad.code() == StatusCode::kCorruption);
  CHECK(bad.ToString() == "corruption: shard-00000.sfs: bad tail magic");
  CHECK(bad.WithContext("open").message() == "open: shard-00000.sfs: bad tail magic");
  CHECK(Status::Ok().WithContext("x").ok());
}

TEST_CASE("base: Result and the macros propagate errors") {
  CHECK(*Quarter(8) == 2);
  Result<int> r = Quarter(6);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  CHECK(r.status().message() == "3 is odd");
  CHECK(CheckEven(4).ok());
  CHECK(CheckEven(5).code() == StatusCode::kInvalidArgument);
}
