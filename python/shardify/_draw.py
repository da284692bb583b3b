"""Seeded host-side random numbers of the transforms, the same draws as the C++ trainer's.

Each batch's random parameters come from (seed, epoch, step, stream) alone, so a resumed
Loader, a run with another thread count and `shardtrain` (base/step_rng.h) all see
the same values: SplitMix64 over 64-bit integers, doubles built from the top 53 bits.
"""

from ._checks import non_negative

_MASK = (1 << 64) - 1


class Rng:
    """SplitMix64 seeded by (seed, epoch, step, stream); stream keeps independent draws
    apart (one per transform)."""

    __slots__ = ("_s",)

    def __init__(self, seed, epoch, step, stream=0):
        self._s = (int(seed) + int(stream) * 0xD1B54A32D192ED03) & _MASK
        self._s = self.next() ^ (int(epoch) & _MASK)
        self._s = self.next() ^ (int(step) & _MASK)
        self.next()

    def next(self):
        self._s = (self._s + 0x9E3779B97F4A7C15) & _MASK
        z = self._s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return z ^ (z >> 31)

    def uniform(self, lo, hi):
        """Uniform in [lo, hi)."""
        return lo + (hi - lo) * ((self.next() >> 11) * 2.0**-53)

    def coin(self):
        return (self.next() >> 63) != 0

    def bernoulli(self, p):
        """True with probability p (never for p <= 0, always for p >= 1)."""
        return self.uniform(0.0, 1.0) < p


def position(seed, epoch, step):
    """The (seed, epoch, step) a transform draws from, checked."""
    return tuple(non_negative(f"transform {name}", value)
                 for name, value in (("seed", seed), ("epoch", epoch), ("step", step)))
