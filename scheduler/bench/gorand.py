"""Go's ``math/rand`` (the seeded ``rngSource`` and the ``Rand`` methods the FGD simulator calls),
ported value for value so that the openb replay draws the same workload as the simulator
(``scheduler/bench/openb.py``).

The generator is an additive lagged Fibonacci register of 607 words (tap 273), seeded by a
Lehmer sequence mixed with Go's fixed table ``rngCooked`` (kept as data beside this module,
``go_rng_cooked.txt``, with its source). The methods follow Go's exactly, including its two ways
to draw below ``n`` (``Int31n`` rejects, the unexported ``int31n`` that ``Shuffle`` uses
multiplies), since each consumes the stream differently. tests/engine/test_openb_replay.py
holds values printed by Go 1.26.8 for the seeds the benchmark uses."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path

_LEN = 607
_TAP = 273
_MASK64 = (1 << 64) - 1
_INT32_MAX = (1 << 31) - 1


@cache
def _cooked() -> tuple[int, ...]:
    text = (Path(__file__).with_name("go_rng_cooked.txt")).read_text()
    values = tuple(int(line) for line in text.splitlines() if line and not line.startswith("#"))
    if len(values) != _LEN:
        raise ValueError(f"go_rng_cooked.txt: {len(values)} values, expected {_LEN}")
    return values


def _seedrand(x: int) -> int:
    """One step of x[n+1] = 48271 * x[n] mod (2**31 - 1), in Go's int32 arithmetic (Schrage)."""
    hi, lo = divmod(x, 44488)  # x > 0 here, so floor division is Go's truncating one
    x = 48271 * lo - 3399 * hi
    return x + _INT32_MAX if x < 0 else x


class GoRand:
    """``rand.New(rand.NewSource(seed))``; also what ``rand.Seed(seed)`` gave the global functions
    before Go 1.24."""

    def __init__(self, seed: int) -> None:
        cooked = _cooked()
        seed %= _INT32_MAX  # Python's % is non-negative here, as Go's code makes it
        if seed == 0:
            seed = 89482311
        x = seed
        vec = [0] * _LEN
        for i in range(-20, _LEN):
            x = _seedrand(x)
            if i >= 0:
                u = x << 40
                x = _seedrand(x)
                u ^= x << 20
                x = _seedrand(x)
                u ^= x
                u ^= cooked[i]
                vec[i] = u & _MASK64
        self._vec = vec
        self._tap = 0
        self._feed = _LEN - _TAP

    def uint64(self) -> int:
        self._tap = self._tap - 1 if self._tap > 0 else _LEN - 1
        self._feed = self._feed - 1 if self._feed > 0 else _LEN - 1
        x = (self._vec[self._feed] + self._vec[self._tap]) & _MASK64
        self._vec[self._feed] = x
        return x

    def int63(self) -> int:
        return self.uint64() & ((1 << 63) - 1)

    def uint32(self) -> int:
        return self.int63() >> 31

    def int31(self) -> int:
        return self.int63() >> 32

    def int_(self) -> int:
        """``Int()`` on a 64-bit platform."""
        return self.int63()

    def int31n(self, n: int) -> int:
        """``Int31n`` (exported): mask for a power of two, else reject above the last full cycle."""
        if n <= 0:
            raise ValueError("int31n: n must be positive")
        if n & (n - 1) == 0:
            return self.int31() & (n - 1)
        top = _INT32_MAX - (1 << 31) % n
        v = self.int31()
        while v > top:
            v = self.int31()
        return v % n

    def intn(self, n: int) -> int:
        if n <= 0:
            raise ValueError("intn: n must be positive")
        if n > _INT32_MAX:
            raise ValueError("intn: n above 2**31 - 1 is not ported")
        return self.int31n(n)

    def _int31n_lemire(self, n: int) -> int:
        """The unexported ``int31n`` (Lemire's multiply), which ``Shuffle`` uses."""
        prod = self.uint32() * n
        low = prod & 0xFFFFFFFF
        if low < n:
            thresh = ((1 << 32) - n) % n
            while low < thresh:
                prod = self.uint32() * n
                low = prod & 0xFFFFFFFF
        return prod >> 32

    def shuffle(self, n: int, swap: Callable[[int, int], None]) -> None:
        if n < 0:
            raise ValueError("shuffle: n must not be negative")
        if n > _INT32_MAX:
            raise ValueError("shuffle: n above 2**31 - 1 is not ported")
        for i in range(n - 1, 0, -1):
            swap(i, self._int31n_lemire(i + 1))

    def perm(self, n: int) -> list[int]:
        m = [0] * n
        for i in range(n):
            j = self.intn(i + 1)
            m[i] = m[j]
            m[j] = i
        return m
