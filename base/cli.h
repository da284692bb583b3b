// What every command line (shardify, shardtool, shardtrain) checks the same way.
//
//   CLI::App app{"..."};
//   app.add_option("--epochs", epochs, "Epochs");  // ... every option, every subcommand
//   shardify::cli::CheckIntegerOptions(app);
//
// CLI11 reads "-1" into an unsigned option as 2^64-1 and a number too large for 64 bits as
// the largest one; a run given `--epochs -1` would then last for ever. The check below makes
// such values usage errors, so a program can refuse them with its usage exit code (2).
#pragma once

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <string>

namespace shardify::cli {

// Makes every option of `app` and of its subcommands that takes integers (a CLI11 type
// name of INT or UINT: int, size_t, uint64_t, std::optional and std::vector of them)
// refuse a value that is negative or does not fit in 64 bits; a value that does not fit
// the option's own type CLI11 refuses already. The error is a CLI::ValidationError
// naming the option and the value. Call once, after every option has been added; options
// added later are not checked. Bounds that depend on the meaning of an option (a batch
// size, a number of threads) are checked where the option is used.
void CheckIntegerOptions(CLI::App& app);

// --cache-dir DIR and --cache-limit SIZE, for datasets given as http:// or https:// URLs
// (docs/remote.md): each sets the environment variable that is its default
// (SHARDIFY_CACHE_DIR, SHARDIFY_CACHE_LIMIT), which the reader consults and the processes
// this one starts inherit. A limit that is not a size (bytes, or with K/M/G/T) is a
// CLI::ValidationError.
void AddCacheOptions(CLI::App& app);

// The one rule for Ctrl-C and SIGTERM: the first sets the returned flag, which the program
// polls to stop cleanly (finish its step, write what it has, exit 130); another one a
// second or more later ends the process at once with 130. A repeat within that second is
// the same request: a launcher (torchrun, scripts/launch.py) passes on a terminal's Ctrl-C
// to processes the terminal has signalled already. Installs the handlers (once).
const std::atomic<bool>* InstallStopSignals();

// A progress line on `out`: on a terminal redrawn in place ('\r'), else one line per
// update, so a log keeps every one.
class StatusLine {
 public:
  StatusLine(std::FILE* out, bool tty) : out_(out), tty_(tty) {}
  // Shows `text` (no newline in it) and flushes.
  void Show(const std::string& text);
  // Ends a line being redrawn (nothing in a log).
  void End();
  bool tty() const { return tty_; }

 private:
  std::FILE* out_;
  bool tty_;
  bool open_ = false;
};

// "[#####.....]": `fraction` (clamped to [0, 1]) of `width` characters filled.
std::string ProgressBar(double fraction, int width);

}  // namespace shardify::cli
