"""A bit-exact Python port of Java's ``java.util.SplittableRandom`` (JDK 17), with fast bulk draws.

Why it exists: the benchmark's producers must write the same payload bytes, in the same order,
as Kafka's ``ProducerPerformance`` (``kafka-producer-perf-test``), which draws them from
``new SplittableRandom(0)``. Matching Java bit for bit lets a Python producer and the Java tool
be compared record for record.

What it assumes:

* JDK 17 semantics of ``SplittableRandom(long seed)`` (gamma = GOLDEN_GAMMA), ``nextLong()``,
  ``nextInt()``, ``nextInt(int bound)`` (``RandomSupport.boundedNextInt``, unchanged since JDK 8)
  and ``nextDouble()`` (``(nextLong() >>> 11) * 0x1.0p-53``). ``split()`` and the other
  ``RandomGenerator`` methods are not ported.
* Seeds are Python ints; any int is reduced modulo 2**64 just as a Java ``long`` holds it.
* numpy >= 2 (NEP 50 scalar promotion; uint64 array arithmetic wraps modulo 2**64).
* One generator is used by one thread at a time, like the Java object (which is not
  thread-safe either). Bulk draws may use worker threads internally; the caller never sees them.

Draw order of Kafka 4.3.1 ``org.apache.kafka.tools.ProducerPerformance`` (read from
kafka-tools-4.3.1-sources.jar):

* One ``SplittableRandom random = new SplittableRandom(0)`` per run, used only for payloads.
* With ``--record-size N`` the payload is regenerated for *every* record, before the record is
  built and sent: ``for (int j = 0; j < payload.length; ++j) payload[j] = (byte)
  (random.nextInt(26) + 65);`` -- N draws of ``nextInt(26)`` per record, bytes 'A'..'Z', one
  reused byte[] overwritten in place. :meth:`SplittableRandom.next_payloads` reproduces this.
* With ``--payload-file`` each record draws exactly one
  ``random.nextInt(payloadByteList.size())`` to pick a payload; ``--payload-monotonic`` draws
  nothing (the payload is ``Long.toString(i)``).
* ``--warmup-records`` does not touch the generator: warmup records draw their payloads like
  every other record; warmup only decides which ``Stats`` object the send callback records into.
* Transactions are time-based (``--transaction-duration-ms``); commits draw nothing, and 4.3.1
  has no abort ratio (KIP-1260's ``--transaction-abort-ratio`` is not in that release).
"""

from __future__ import annotations

import operator
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

GOLDEN_GAMMA = 0x9E3779B97F4A7C15

_MASK64 = (1 << 64) - 1
_MASK32 = (1 << 32) - 1
_INT_MAX = (1 << 31) - 1
_DOUBLE_UNIT = 2.0**-53

# Stafford variant 13 (mix64) and variant 4 (mix32) multipliers, exactly as in the JDK.
_MIX64_M1 = 0xBF58476D1CE4E5B9
_MIX64_M2 = 0x94D049BB133111EB
_MIX32_M1 = 0x62A9D9ED799705F5
_MIX32_M2 = 0xCB24D0A5C88C35B3

_U64_MIX32_M1 = np.uint64(_MIX32_M1)
_U64_MIX32_M2 = np.uint64(_MIX32_M2)

# Draws per numpy pass: the two uint64 scratch buffers (2 x 512 KiB) stay in L2, which makes
# the ~15 passes of the mix cheap compared with streaming whole arrays through memory.
_CHUNK = 1 << 16
# Below this many draws the thread hand-off costs more than it saves.
_PARALLEL_MIN = 1 << 20
_WORKERS = max(1, min(os.cpu_count() or 1, 8))

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
_steps_cache: dict[int, np.ndarray] = {}


def _mix64(z: int) -> int:
    """Java ``mix64`` on an unsigned 64-bit value, returning an unsigned 64-bit value."""
    z = ((z ^ (z >> 30)) * _MIX64_M1) & _MASK64
    z = ((z ^ (z >> 27)) * _MIX64_M2) & _MASK64
    return z ^ (z >> 31)


def _mix32(z: int) -> int:
    """Java ``mix32`` on an unsigned 64-bit value, returning the signed 32-bit Java int."""
    z = ((z ^ (z >> 33)) * _MIX32_M1) & _MASK64
    r = (((z ^ (z >> 28)) * _MIX32_M2) & _MASK64) >> 32
    return r - (1 << 32) if r & 0x80000000 else r


def _to_int32(x: int) -> int:
    """Wrap a Python int to a Java int, so the bounded loop's overflow test behaves as in Java."""
    x &= _MASK32
    return x - (1 << 32) if x & 0x80000000 else x


def _check_bound(bound: int) -> int:
    """Validate a Java ``int`` bound as ``RandomSupport.checkBound`` does."""
    bound = operator.index(bound)
    if bound <= 0:
        raise ValueError(f"bound must be positive, got {bound}")
    if bound > _INT_MAX:
        raise ValueError(f"bound must fit in a Java int, got {bound}")
    return bound


def _steps(chunk: int) -> np.ndarray:
    """``gamma * [1..chunk]`` mod 2**64, cached: the seed offsets of one chunk of draws."""
    steps = _steps_cache.get(chunk)
    if steps is None:
        steps = np.arange(1, chunk + 1, dtype=np.uint64)
        steps *= np.uint64(GOLDEN_GAMMA)
        _steps_cache[chunk] = steps
    return steps


def _get_pool() -> ThreadPoolExecutor:
    """The shared worker pool, created on first need so importing the module stays cheap."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="splittable-random")
        return _pool


class _Reducer:
    """``boundedNextInt``'s reduction of one mix32 candidate, precomputed for a fixed bound."""

    def __init__(self, bound: int) -> None:
        """Precompute the rejection limit and the division magic for ``bound``."""
        self.bound = bound
        self.pow2 = bound & (bound - 1) == 0
        if not self.pow2:
            # Java rejects u (= r >>> 1) when u + m - u % bound overflows an int, which happens
            # exactly for u in the last, incomplete block of size bound below 2**31.
            self.limit = (1 << 31) - (1 << 31) % bound
            # u % bound via multiply-shift (Granlund-Montgomery): exact for every u < 2**31, and
            # u * magic < 2**64, so it stays in uint64 and avoids numpy's slow integer division.
            shift = 31 + (bound - 1).bit_length()
            self.magic = np.uint64(-(-(1 << shift) // bound))
            self.shift = np.uint64(shift)
            self.u64_bound = np.uint64(bound)
            self.u64_limit = np.uint64(self.limit)


def _fill_candidates(
    seed: int, out: np.ndarray, reducer: _Reducer, offset: int, chunk: int
) -> list[np.ndarray]:
    """Reduce candidates 1..len(out) after ``seed`` into ``out``; return the rejected indices.

    A rejected candidate's slot holds garbage; the caller removes those slots.
    """
    n = out.shape[0]
    steps = _steps(chunk)
    z = np.empty(min(chunk, n), dtype=np.uint64)
    t = np.empty_like(z)
    rejected: list[np.ndarray] = []
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        zz, tt = z[:m], t[:m]
        np.add(steps[:m], np.uint64((seed + GOLDEN_GAMMA * start) & _MASK64), out=zz)
        np.right_shift(zz, np.uint64(33), out=tt)
        np.bitwise_xor(zz, tt, out=zz)
        np.multiply(zz, _U64_MIX32_M1, out=zz)
        np.right_shift(zz, np.uint64(28), out=tt)
        np.bitwise_xor(zz, tt, out=zz)
        np.multiply(zz, _U64_MIX32_M2, out=zz)
        dest = out[start : start + m]
        if reducer.pow2:
            np.right_shift(zz, np.uint64(32), out=zz)
            np.bitwise_and(zz, np.uint64(reducer.bound - 1), out=dest, casting="unsafe")
        else:
            # The top 31 bits of the product are Java's u = nextInt() >>> 1.
            np.right_shift(zz, np.uint64(33), out=zz)
            if zz.max() >= reducer.u64_limit:
                rejected.append(np.flatnonzero(zz >= reducer.u64_limit) + start)
            np.multiply(zz, reducer.magic, out=tt)
            np.right_shift(tt, reducer.shift, out=tt)
            np.multiply(tt, reducer.u64_bound, out=tt)
            # Casting straight into the (narrow) output saves a full uint64 pass.
            np.subtract(zz, tt, out=dest, casting="unsafe")
        if offset:
            np.add(dest, offset, out=dest)
    return rejected


class SplittableRandom:
    """Java's ``java.util.SplittableRandom(long seed)``, bit for bit, plus vectorised bulk draws."""

    __slots__ = ("_seed",)

    def __init__(self, seed: int) -> None:
        """Java ``new SplittableRandom(seed)``: the seed is kept as an unsigned 64-bit value."""
        self._seed = operator.index(seed) & _MASK64

    @property
    def gamma(self) -> int:
        """The odd increment added to the seed per draw (always GOLDEN_GAMMA for this constructor)."""
        return GOLDEN_GAMMA

    def _next_seed(self) -> int:
        """Java ``nextSeed()``: advance the seed by gamma, modulo 2**64."""
        self._seed = (self._seed + GOLDEN_GAMMA) & _MASK64
        return self._seed

    def next_long(self) -> int:
        """Java ``nextLong()``, as a signed 64-bit value."""
        r = _mix64(self._next_seed())
        return r - (1 << 64) if r >> 63 else r

    def next_int_unbounded(self) -> int:
        """Java ``nextInt()``, as a signed 32-bit value."""
        return _mix32(self._next_seed())

    def next_int(self, bound: int) -> int:
        """Java ``nextInt(int bound)``: uniform in ``[0, bound)``; ValueError unless 0 < bound < 2**31."""
        bound = _check_bound(bound)
        m = bound - 1
        r = _mix32(self._next_seed())
        if bound & m == 0:
            return r & m
        u = (r & _MASK32) >> 1
        while True:
            r = u % bound
            if _to_int32(u + m - r) >= 0:
                return r
            u = (_mix32(self._next_seed()) & _MASK32) >> 1

    def next_double(self) -> float:
        """Java ``nextDouble()``: ``(nextLong() >>> 11) * 2**-53``, uniform in ``[0, 1)``."""
        return (_mix64(self._next_seed()) >> 11) * _DOUBLE_UNIT

    def next_ints(self, bound: int, count: int) -> np.ndarray:
        """``count`` successive ``next_int(bound)`` results as an int64 array, state advanced alike."""
        bound = _check_bound(bound)
        count = operator.index(count)
        if count < 0:
            raise ValueError(f"count must be non-negative, got {count}")
        out = np.empty(count, dtype=np.int64)
        self._fill_bounded(out, bound, 0)
        return out

    def next_payloads(self, count: int, record_size: int) -> np.ndarray:
        """``count`` ProducerPerformance payloads of ``record_size`` bytes (``nextInt(26) + 65``) as uint8 rows."""
        count = operator.index(count)
        record_size = operator.index(record_size)
        if count < 0 or record_size < 0:
            raise ValueError(f"count and record_size must be non-negative, got {count}, {record_size}")
        out = np.empty((count, record_size), dtype=np.uint8)
        # Records are drawn one after another, byte by byte, so row-major order is draw order.
        self._fill_bounded(out.reshape(-1), 26, 65)
        return out

    def next_payload(self, record_size: int) -> bytes:
        """One ProducerPerformance ``--record-size`` payload, drawn exactly as Java draws it."""
        return self.next_payloads(1, record_size).tobytes()

    def _fill_bounded(self, out: np.ndarray, bound: int, offset: int) -> None:
        """Fill flat ``out`` with successive ``next_int(bound) + offset`` values."""
        reducer = _Reducer(bound)
        pos = 0
        n = out.shape[0]
        # A rejected candidate only makes Java draw one more candidate, so the results are the
        # accepted candidates in order. Each round reduces exactly as many candidates as values are
        # still missing and then squeezes out the rejected ones; it can never consume a candidate
        # beyond the last accepted one, so the seed ends where Java's would.
        while pos < n:
            rejected = self._fill_round(out[pos:], reducer, offset)
            if rejected.size:
                kept = np.delete(out[pos:], rejected)
                out[pos : pos + kept.shape[0]] = kept
                pos += kept.shape[0]
            else:
                pos = n

    def _fill_round(self, out: np.ndarray, reducer: _Reducer, offset: int) -> np.ndarray:
        """Reduce the next ``len(out)`` candidates into ``out``, advance the seed, return rejections."""
        n = out.shape[0]
        seed = self._seed
        chunk = _CHUNK
        if n >= _PARALLEL_MIN and _WORKERS > 1:
            # Candidate k depends only on seed + k * gamma, so disjoint ranges are independent.
            per = -(-n // _WORKERS)
            per = -(-per // chunk) * chunk
            pool = _get_pool()
            futures = []
            for start in range(0, n, per):
                sub_seed = (seed + GOLDEN_GAMMA * start) & _MASK64
                sub_out = out[start : start + per]
                futures.append((start, pool.submit(_fill_candidates, sub_seed, sub_out, reducer, offset, chunk)))
            parts = [r + start for start, f in futures for r in f.result()]
        else:
            parts = _fill_candidates(seed, out, reducer, offset, chunk)
        self._seed = (seed + GOLDEN_GAMMA * n) & _MASK64
        if not parts:
            return np.empty(0, dtype=np.intp)
        return np.concatenate(parts)
