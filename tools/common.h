// shardtool conventions shared by every subcommand: exit codes and output options.
//
// Every subcommand is a library function that writes its report to a caller-given
// std::ostream and returns a Status; it never prints elsewhere and never exits.
#pragma once

#include "base/status.h"

namespace shardify::tools {

// Process exit codes of shardtool, documented in its --help.
inline constexpr int kExitOk = 0;
inline constexpr int kExitProblem = 1;  // the data is damaged (verify found problems, corruption)
inline constexpr int kExitUsage = 2;    // bad arguments, missing files, I/O errors

// kExitOk for ok, kExitProblem for kCorruption, kExitUsage for everything else.
int ExitCodeFor(const Status& status);

}  // namespace shardify::tools
