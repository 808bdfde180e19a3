"""Bit-for-bit parity of producers.splittable_random with the machine's JDK SplittableRandom.

A small Java program is compiled and run once per module; every Python draw is compared with
Java's by exact equality (doubles via their raw IEEE bits, bulk streams via SHA-256).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import textwrap

import numpy as np
import pytest

import producers.splittable_random as sr
from producers.splittable_random import GOLDEN_GAMMA, SplittableRandom

MASK64 = (1 << 64) - 1
BOUNDS = [1, 2, 26, 1000, 2**30 + 1, 2**31 - 1]
N_LONGS = 3000
N_INTS = 3000
N_DOUBLES = 1000
N_UNBOUNDED = 500
RECORDS = 2000
RECORD_SIZE = 100
COMMIT_EVERY = 37
ABORT_RATIO = 0.3
BULK_INTS = 1_500_000  # above _PARALLEL_MIN, so the threaded path is the one compared with Java
BULK_INT_BOUND = 2**30 + 1
BULK_RECORDS = 12_000
# Where the crafted seed's nextInt(26) candidate is rejected: inside the second worker's half of
# the bulk payload draw, and early in the ProducerPerformance-style stream.
BULK_REJECT_AT = 700_003
SMALL_REJECT_AT = 5 * RECORD_SIZE + 17  # record 5, byte 17


def _signed64(x: int) -> int:
    x &= MASK64
    return x - (1 << 64) if x >> 63 else x


def _unxorshift(y: int, shift: int) -> int:
    """Invert x ^ (x >>> shift) on 64 bits."""
    x = y
    for _ in range(64 // shift + 1):
        x = y ^ (x >> shift)
    return x


def _seed_rejecting_nextint26_at(k: int) -> int:
    """A seed whose (k+1)-th nextInt() candidate is rejected by nextInt(26) (k counts from 0).

    mix32 is a bijection before its final >>> 32, so pick the top bits of the last product
    (u = 2**31 - 1 >= 2**31 - 2**31 % 26) and run the mix backwards to the seed.
    """
    product = ((2**31 - 1) << 33) | 0x1234567
    y = (product * pow(sr._MIX32_M2, -1, 1 << 64)) & MASK64
    y = _unxorshift(y, 28)
    y = (y * pow(sr._MIX32_M1, -1, 1 << 64)) & MASK64
    z = _unxorshift(y, 33)
    return _signed64(z - GOLDEN_GAMMA * (k + 1))


SMALL_REJECT_SEED = _seed_rejecting_nextint26_at(SMALL_REJECT_AT)
BULK_REJECT_SEED = _seed_rejecting_nextint26_at(BULK_REJECT_AT)
SEEDS = [0, -7, 2**63 - 1, 123456789, -(2**63), SMALL_REJECT_SEED]
PRODUCER_SEEDS = [0, 42, SMALL_REJECT_SEED]

JAVA_SOURCE = textwrap.dedent(
    """
    import java.nio.ByteBuffer;
    import java.nio.charset.StandardCharsets;
    import java.security.MessageDigest;
    import java.util.HexFormat;
    import java.util.SplittableRandom;

    public class SrDump {
        static final int[] BOUNDS = {1, 2, 26, 1000, (1 << 30) + 1, Integer.MAX_VALUE};

        public static void main(String[] args) throws Exception {
            StringBuilder out = new StringBuilder();
            for (String s : args[0].split(",")) {
                long seed = Long.parseLong(s);
                SplittableRandom r = new SplittableRandom(seed);
                out.append("seed ").append(seed).append('\\n');
                out.append("L");
                for (int i = 0; i < %(N_LONGS)d; i++) out.append(' ').append(r.nextLong());
                out.append("\\nI");
                for (int i = 0; i < %(N_INTS)d; i++) out.append(' ').append(r.nextInt(BOUNDS[i %% BOUNDS.length]));
                out.append("\\nD");
                for (int i = 0; i < %(N_DOUBLES)d; i++)
                    out.append(' ').append(Long.toHexString(Double.doubleToRawLongBits(r.nextDouble())));
                out.append("\\nU");
                for (int i = 0; i < %(N_UNBOUNDED)d; i++) out.append(' ').append(r.nextInt());
                out.append("\\nT ").append(r.nextLong()).append('\\n');
            }
            // ProducerPerformance --record-size: the payload is regenerated before every send; a
            // commit point every COMMIT_EVERY records (and once after the loop) draws the abort decision.
            for (String s : args[1].split(",")) {
                long seed = Long.parseLong(s);
                SplittableRandom random = new SplittableRandom(seed);
                MessageDigest md = MessageDigest.getInstance("SHA-256");
                byte[] payload = new byte[%(RECORD_SIZE)d];
                String first = null;
                StringBuilder aborts = new StringBuilder();
                for (long i = 0; i < %(RECORDS)d; i++) {
                    for (int j = 0; j < payload.length; ++j)
                        payload[j] = (byte) (random.nextInt(26) + 65);
                    md.update(payload);
                    if (i == 0) first = new String(payload, StandardCharsets.US_ASCII);
                    if ((i + 1) %% %(COMMIT_EVERY)d == 0)
                        aborts.append(random.nextDouble() < %(ABORT_RATIO)s ? 'A' : 'C');
                }
                aborts.append(random.nextDouble() < %(ABORT_RATIO)s ? 'A' : 'C');
                out.append("P ").append(seed).append(' ').append(HexFormat.of().formatHex(md.digest()))
                   .append(' ').append(first).append(' ').append(aborts)
                   .append(' ').append(random.nextLong()).append('\\n');
            }
            {
                SplittableRandom r = new SplittableRandom(123456789L);
                MessageDigest md = MessageDigest.getInstance("SHA-256");
                ByteBuffer buf = ByteBuffer.allocate(4);
                for (int i = 0; i < %(BULK_INTS)d; i++) {
                    buf.clear();
                    buf.putInt(r.nextInt(%(BULK_INT_BOUND)d));
                    md.update(buf.array());
                }
                out.append("B ").append(HexFormat.of().formatHex(md.digest())).append(' ')
                   .append(r.nextLong()).append('\\n');
            }
            {
                SplittableRandom random = new SplittableRandom(Long.parseLong(args[2]));
                MessageDigest md = MessageDigest.getInstance("SHA-256");
                byte[] payload = new byte[%(RECORD_SIZE)d];
                for (long i = 0; i < %(BULK_RECORDS)d; i++) {
                    for (int j = 0; j < payload.length; ++j)
                        payload[j] = (byte) (random.nextInt(26) + 65);
                    md.update(payload);
                }
                out.append("Q ").append(HexFormat.of().formatHex(md.digest())).append(' ')
                   .append(random.nextLong()).append('\\n');
            }
            System.out.print(out);
        }
    }
    """
) % {
    "N_LONGS": N_LONGS,
    "N_INTS": N_INTS,
    "N_DOUBLES": N_DOUBLES,
    "N_UNBOUNDED": N_UNBOUNDED,
    "RECORD_SIZE": RECORD_SIZE,
    "RECORDS": RECORDS,
    "COMMIT_EVERY": COMMIT_EVERY,
    "ABORT_RATIO": repr(ABORT_RATIO),
    "BULK_INTS": BULK_INTS,
    "BULK_INT_BOUND": BULK_INT_BOUND,
    "BULK_RECORDS": BULK_RECORDS,
}


@pytest.fixture(scope="module")
def java_output(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Compile and run SrDump once; its stdout lines."""
    javac = shutil.which("javac")
    java = shutil.which("java")
    if javac is None or java is None:
        pytest.fail("javac/java not found on PATH: the SplittableRandom parity test needs a JDK 17")
    workdir = tmp_path_factory.mktemp("srdump")
    (workdir / "SrDump.java").write_text(JAVA_SOURCE)
    subprocess.run([javac, "SrDump.java"], cwd=workdir, check=True, capture_output=True, timeout=120)
    result = subprocess.run(
        [
            java,
            "-cp",
            str(workdir),
            "SrDump",
            ",".join(str(s) for s in SEEDS),
            ",".join(str(s) for s in PRODUCER_SEEDS),
            str(BULK_REJECT_SEED),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return result.stdout.splitlines()


def _java_seed_block(lines: list[str], seed: int) -> dict[str, list[str]]:
    start = lines.index(f"seed {seed}")
    block = {}
    for line in lines[start + 1 : start + 6]:
        tag, _, rest = line.partition(" ")
        block[tag] = rest.split()
    return block


def _double_bits(x: float) -> str:
    return format(int(np.float64(x).view(np.uint64)), "x")


def test_crafted_seeds_really_reject() -> None:
    """The crafted seeds must hit a nextInt(26) rejection, or the fallback path goes untested."""
    for seed, k in [(SMALL_REJECT_SEED, SMALL_REJECT_AT), (BULK_REJECT_SEED, BULK_REJECT_AT)]:
        candidate = sr._mix32((seed + GOLDEN_GAMMA * (k + 1)) & MASK64)
        assert (candidate & 0xFFFFFFFF) >> 1 >= 2**31 - 2**31 % 26


@pytest.mark.parametrize("seed", SEEDS)
def test_scalar_draws_match_java(java_output: list[str], seed: int) -> None:
    """nextLong, interleaved nextInt(bound), nextDouble and nextInt() streams equal Java's."""
    java = _java_seed_block(java_output, seed)
    r = SplittableRandom(seed)
    assert [str(r.next_long()) for _ in range(N_LONGS)] == java["L"]
    assert [str(r.next_int(BOUNDS[i % len(BOUNDS)])) for i in range(N_INTS)] == java["I"]
    assert [_double_bits(r.next_double()) for _ in range(N_DOUBLES)] == java["D"]
    assert [str(r.next_int_unbounded()) for _ in range(N_UNBOUNDED)] == java["U"]
    assert [str(r.next_long())] == java["T"]


@pytest.mark.parametrize("seed", PRODUCER_SEEDS)
def test_producer_performance_sequence_matches_java(java_output: list[str], seed: int) -> None:
    """Payloads drawn in bulk between commit points, then the abort draw, follow Java's order."""
    line = next(x for x in java_output if x.startswith(f"P {seed} "))
    _, _, java_digest, java_first, java_aborts, java_next = line.split(" ")
    r = SplittableRandom(seed)
    digest = hashlib.sha256()
    first = None
    aborts = []
    done = 0
    while done < RECORDS:
        batch = min(COMMIT_EVERY, RECORDS - done)
        if batch == COMMIT_EVERY:
            payloads = r.next_payloads(batch, RECORD_SIZE)
            rows = [payloads[i].tobytes() for i in range(batch)]
        else:
            rows = [r.next_payload(RECORD_SIZE) for _ in range(batch)]
        for row in rows:
            digest.update(row)
            if first is None:
                first = row.decode("ascii")
        done += batch
        if done % COMMIT_EVERY == 0:
            aborts.append("A" if r.next_double() < ABORT_RATIO else "C")
    aborts.append("A" if r.next_double() < ABORT_RATIO else "C")
    assert first == java_first
    assert digest.hexdigest() == java_digest
    assert "".join(aborts) == java_aborts
    assert str(r.next_long()) == java_next


def test_bulk_next_ints_match_java(java_output: list[str]) -> None:
    """A threaded, rejection-heavy next_ints stream hashes like Java's and leaves the same state."""
    _, java_digest, java_next = next(x for x in java_output if x.startswith("B ")).split(" ")
    r = SplittableRandom(123456789)
    values = r.next_ints(BULK_INT_BOUND, BULK_INTS)
    assert hashlib.sha256(values.astype(">i4").tobytes()).hexdigest() == java_digest
    assert str(r.next_long()) == java_next


def test_bulk_payloads_with_rejection_match_java(java_output: list[str]) -> None:
    """A threaded next_payloads with a nextInt(26) rejection in its second half matches Java."""
    _, java_digest, java_next = next(x for x in java_output if x.startswith("Q ")).split(" ")
    r = SplittableRandom(BULK_REJECT_SEED)
    payloads = r.next_payloads(BULK_RECORDS, RECORD_SIZE)
    assert payloads.dtype == np.uint8 and payloads.shape == (BULK_RECORDS, RECORD_SIZE)
    assert hashlib.sha256(payloads.tobytes()).hexdigest() == java_digest
    assert str(r.next_long()) == java_next


@pytest.mark.parametrize("bound", [1, 2, 26, 64, 1000, 2**30 + 1, 2**31 - 1, 3 * 2**29])
@pytest.mark.parametrize("seed", [0, -7, SMALL_REJECT_SEED])
def test_next_ints_equals_scalar(monkeypatch: pytest.MonkeyPatch, bound: int, seed: int) -> None:
    """next_ints equals repeated next_int and leaves the generator in the same state."""
    # Tiny chunks and an odd worker count push a small draw through every chunk/thread seam.
    monkeypatch.setattr(sr, "_CHUNK", 1000)
    monkeypatch.setattr(sr, "_PARALLEL_MIN", 5000)
    monkeypatch.setattr(sr, "_WORKERS", 3)
    for count in [0, 1, 999, 1000, 1001, 12_345]:
        vectorised, scalar = SplittableRandom(seed), SplittableRandom(seed)
        values = vectorised.next_ints(bound, count)
        assert values.tolist() == [scalar.next_int(bound) for _ in range(count)]
        assert vectorised.next_long() == scalar.next_long()
        assert vectorised.next_int(bound) == scalar.next_int(bound)


def test_next_payloads_equals_scalar_with_rejection(monkeypatch: pytest.MonkeyPatch) -> None:
    """The payload fast path squeezes out a rejected candidate exactly as Java's loop redraws."""
    monkeypatch.setattr(sr, "_CHUNK", 256)
    monkeypatch.setattr(sr, "_PARALLEL_MIN", 1024)
    vectorised, scalar = SplittableRandom(SMALL_REJECT_SEED), SplittableRandom(SMALL_REJECT_SEED)
    payloads = vectorised.next_payloads(30, RECORD_SIZE)
    expected = bytes(scalar.next_int(26) + 65 for _ in range(30 * RECORD_SIZE))
    assert payloads.tobytes() == expected
    assert vectorised.next_payload(7) == bytes(scalar.next_int(26) + 65 for _ in range(7))
    assert vectorised.next_long() == scalar.next_long()


def test_invalid_arguments() -> None:
    """Bounds outside Java's (0, Integer.MAX_VALUE] and negative counts are rejected."""
    r = SplittableRandom(0)
    for bound in [0, -1, 2**31]:
        with pytest.raises(ValueError):
            r.next_int(bound)
        with pytest.raises(ValueError):
            r.next_ints(bound, 3)
    with pytest.raises(ValueError):
        r.next_ints(26, -1)
    with pytest.raises(ValueError):
        r.next_payloads(-1, 10)


@pytest.mark.parametrize("seed", PRODUCER_SEEDS)
def test_produce_engine_draws_payloads_and_abort_decisions_like_java(java_output: list[str], seed: int) -> None:
    """The whole `eosbench produce` loop (fake client) draws in Java's order: same payloads, same aborts."""
    import io

    from conf.produce_settings import ProduceSettings
    from producers.perf import ProducerPerformance
    from tests.unit.fake_kafka import FakeProducer

    line = next(x for x in java_output if x.startswith(f"P {seed} "))
    _, _, java_digest, java_first, java_aborts, _ = line.split(" ")
    settings = ProduceSettings(topic="t", num_records=RECORDS, record_size=RECORD_SIZE, throughput=-1,
                               records_per_transaction=COMMIT_EVERY, transaction_abort_ratio=ABORT_RATIO,
                               seed=seed)
    clients: list[FakeProducer] = []

    def factory(*args, **kwargs) -> FakeProducer:
        clients.append(FakeProducer(*args, **kwargs))
        return clients[-1]

    summary = ProducerPerformance(settings, out=io.StringIO(), producer_factory=factory).run()
    sent = clients[0].values
    digest = hashlib.sha256(b"".join(sent[str(i).encode()] for i in range(RECORDS)))
    assert sent[b"0"].decode("ascii") == java_first
    assert digest.hexdigest() == java_digest
    assert "".join("A" if aborted else "C" for aborted in summary.abort_decisions) == java_aborts
