// Console progress (see progress.h).
#include "convert/progress.h"

#include <cstring>
#include <string>

namespace shardify::convert {

ConsoleProgress::ConsoleProgress(std::FILE* out, bool tty)
    : out_(out), tty_(tty), start_(Clock::now()), phase_start_(start_), last_(start_) {}

void ConsoleProgress::OnProgress(const Progress& p) {
  const auto now = Clock::now();
  if (std::strcmp(p.phase, phase_) != 0) {
    phase_ = p.phase;
    phase_start_ = now;
  }
  const auto gap = tty_ ? std::chrono::milliseconds(100) : std::chrono::milliseconds(5000);
  if (now - last_ < gap && p.done != p.total) return;
  if (!tty_ && p.done == p.total && now - phase_start_ < gap) return;  // short phases stay quiet
  last_ = now;
  const double secs = std::chrono::duration<double>(now - phase_start_).count();
  if (secs < 0.05 && p.done != p.total) return;  // no rate to show yet
  const double rate = secs > 0 ? static_cast<double>(p.done) / secs : 0.0;
  const double eta = rate > 0 ? static_cast<double>(p.total - p.done) / rate : 0.0;
  const double frac = p.total > 0 ? static_cast<double>(p.done) / static_cast<double>(p.total) : 1.0;
  if (tty_) {
    const int width = 30;
    std::string bar(static_cast<size_t>(frac * width), '#');
    bar.resize(width, '.');
    std::fprintf(out_, "\r%-8s [%s] %3.0f%% %llu/%llu  %.0f files/s  ETA %.0f s   ", p.phase, bar.c_str(), frac * 100,
                 static_cast<unsigned long long>(p.done), static_cast<unsigned long long>(p.total), rate, eta);
    drawn_ = true;
  } else {
    std::fprintf(out_, "%s: %llu/%llu (%.0f%%), %.0f files/s, ETA %.0f s\n", p.phase,
                 static_cast<unsigned long long>(p.done), static_cast<unsigned long long>(p.total), frac * 100, rate,
                 eta);
  }
  std::fflush(out_);
}

void ConsoleProgress::Done() {
  if (drawn_) std::fprintf(out_, "\n");
  drawn_ = false;
}

}  // namespace shardify::convert
