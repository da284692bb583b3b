// StepRng: the seeded random numbers of the augmentations (reader/augment.cpp's draws of
// nnU-Net's parameters, the trainer's basic transforms), from (seed, epoch, step, stream)
// alone. python/shardify/_draw.py is its Python twin: the same draws, so a run, its resumed
// continuation, a run with another thread count and Python's transforms agree.
#pragma once

#include <cstdint>

namespace shardify {

// SplitMix64 (Steele, Lea and Flood, 2014), the generator under every seeded draw here:
// Mix is its output function, Next its step.
inline uint64_t SplitMix64Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
inline uint64_t SplitMix64Next(uint64_t& state) { return SplitMix64Mix(state += 0x9E3779B97F4A7C15ull); }

// SplitMix64 seeded by (seed, epoch, step, stream): a tiny, portable, well-mixed
// generator, the same draws on every platform and for any thread count. Streams keep
// independent draws apart (e.g. one per transform); stream 0 is the batch's first.
// Not thread-safe: one per thread (it is cheap to make).
class StepRng {
 public:
  StepRng(uint64_t seed, uint64_t epoch, uint64_t step, uint64_t stream = 0)
      : s_(seed + stream * 0xD1B54A32D192ED03ull) {
    s_ = Next() ^ epoch;
    s_ = Next() ^ step;
    Next();
  }
  uint64_t Next() { return SplitMix64Next(s_); }
  // Uniform in [lo, hi).
  double Uniform(double lo, double hi) { return lo + (hi - lo) * ((Next() >> 11) * 0x1.0p-53); }
  bool Coin() { return (Next() >> 63) != 0; }
  // True with probability p (never for p <= 0, always for p >= 1).
  bool Bernoulli(double p) { return Uniform(0, 1) < p; }

 private:
  uint64_t s_;
};

}  // namespace shardify
