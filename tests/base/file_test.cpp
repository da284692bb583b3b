// Paths made from names that come from outside: only relative names that stay inside the
// folder they are joined to.
#include "base/file.h"

#include <catch2/catch.hpp>
#include <string>

namespace shardify {
namespace {

TEST_CASE("base: a relative name stays inside its folder, anything else is refused by JoinRelative") {
  for (const char* good : {"a", "parts/00001-of-00002/shard-00000.sfs", ".hidden/x", "a..b/..c", "shard 0?#%.sfs"}) {
    INFO(good);
    CHECK(IsRelativeName(good));
    CHECK(*JoinRelative("/stage/", good) == std::string("/stage/") + good);
  }
  const std::string bad[] = {"",
                             ".",
                             "..",
                             "a/../b",
                             "../x",
                             "a/./b",
                             "a//b",
                             "/etc",
                             "a/",
                             "a\\..",
                             "a\tb",
                             "a\x7f"
                             "b",
                             "a/..\n/b",
                             std::string("a\0b", 3)};
  for (const std::string& name : bad) {
    INFO(name);
    CHECK_FALSE(IsRelativeName(name));
    const Result<std::string> joined = JoinRelative("/stage", name);
    CHECK(joined.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(joined.status().message(), Catch::Contains("/stage"));
  }
  CHECK_THAT(JoinRelative("/stage", "x/..\x1b[2J").status().message(), Catch::StartsWith("'x/..\\x1B[2J' is not"));
}

}  // namespace
}  // namespace shardify
