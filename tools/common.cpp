#include "tools/common.h"

namespace shardify::tools {

int ExitCodeFor(const Status& status) {
  if (status.ok()) return kExitOk;
  if (status.code() == StatusCode::kCorruption) return kExitProblem;
  return kExitUsage;
}

}  // namespace shardify::tools
