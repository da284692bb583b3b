// Progress output of the shardify CLI: a bar on a terminal, else a line every few seconds.
#pragma once

#include <chrono>
#include <cstdio>

#include "base/cli.h"
#include "convert/convert.h"

namespace shardify::convert {

class ConsoleProgress final : public ProgressSink {
 public:
  // Writes to `out` (stderr in the CLI). `tty` selects the bar.
  ConsoleProgress(std::FILE* out, bool tty);
  void OnProgress(const Progress& p) override;
  // Ends the bar line, if one is shown.
  void Done();

 private:
  using Clock = std::chrono::steady_clock;
  cli::StatusLine line_;
  Clock::time_point start_, phase_start_, last_;
  const char* phase_ = "";
};

}  // namespace shardify::convert
