// Console progress (see progress.h).
#include "convert/pipeline/progress.h"

#include <cstring>
#include <string>

namespace shardify::convert {

ConsoleProgress::ConsoleProgress(std::FILE* out, bool tty)
    : line_(out, tty), start_(Clock::now()), phase_start_(start_), last_(start_) {}

void ConsoleProgress::OnProgress(const Progress& p) {
  const auto now = Clock::now();
  if (std::strcmp(p.phase, phase_) != 0) {
    phase_ = p.phase;
    phase_start_ = now;
  }
  const auto gap = line_.tty() ? std::chrono::milliseconds(100) : std::chrono::milliseconds(5000);
  if (now - last_ < gap && p.done != p.total) return;
  if (!line_.tty() && p.done == p.total && now - phase_start_ < gap) return;  // short phases stay quiet
  last_ = now;
  const double secs = std::chrono::duration<double>(now - phase_start_).count();
  if (secs < 0.05 && p.done != p.total) return;  // no rate to show yet
  const double rate = secs > 0 ? static_cast<double>(p.done) / secs : 0.0;
  const double eta = rate > 0 ? static_cast<double>(p.total - p.done) / rate : 0.0;
  const double frac = p.total > 0 ? static_cast<double>(p.done) / static_cast<double>(p.total) : 1.0;
  char text[256];
  if (line_.tty()) {
    std::snprintf(text, sizeof text, "%-8s %s %3.0f%% %llu/%llu  %.0f files/s  ETA %.0f s   ", p.phase,
                  cli::ProgressBar(frac, 30).c_str(), frac * 100, static_cast<unsigned long long>(p.done),
                  static_cast<unsigned long long>(p.total), rate, eta);
  } else {
    std::snprintf(text, sizeof text, "%s: %llu/%llu (%.0f%%), %.0f files/s, ETA %.0f s", p.phase,
                  static_cast<unsigned long long>(p.done), static_cast<unsigned long long>(p.total), frac * 100, rate,
                  eta);
  }
  line_.Show(text);
}

void ConsoleProgress::Done() { line_.End(); }

}  // namespace shardify::convert
