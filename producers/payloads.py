"""`eosbench produce`'s payloads: Java ProducerPerformance's, from the same SplittableRandom, in the same order."""

from __future__ import annotations

import copy

import numpy as np

from conf.produce_settings import ProduceSettings
from producers.splittable_random import SplittableRandom

PAYLOAD_CHUNK_RECORDS = 1024


class PayloadSource:
    """Java's payloads in Java's draw order, drawn ahead in vectorised chunks.

    A commit-point draw must see the generator exactly where Java's would be: right after the
    last payload handed out. Chunks are drawn ahead, so at a commit point the generator is
    rewound to the chunk's start and replayed up to that payload (at most one chunk of work).
    (Drawing the next chunk on a worker thread was measured and is slower: on two cores the
    worker competes with librdkafka's threads and for the GIL.)
    """

    def __init__(self, settings: ProduceSettings, rng: SplittableRandom, chunk_records: int):
        self.rng = rng
        self.record_size = settings.record_size
        self.payload_list = settings.read_payloads()
        self.monotonic = settings.payload_monotonic
        self.chunk_records = chunk_records
        self._chunk: list[bytes] | None = None
        self._chunk_start_rng = copy.copy(rng)
        self._handed = 0

    def _draw(self, rng: SplittableRandom, records: int) -> np.ndarray:
        if self.record_size is not None:
            return rng.next_payloads(records, self.record_size)
        return rng.next_ints(len(self.payload_list), records)

    def _draw_rows(self, rng: SplittableRandom, records: int) -> list[bytes]:
        drawn = self._draw(rng, records)
        if self.record_size is not None:
            flat = drawn.tobytes()
            size = self.record_size
            return [flat[k:k + size] for k in range(0, len(flat), size)]
        return [self.payload_list[int(index)] for index in drawn]

    def payload(self, index: int) -> bytes:
        """Return record `index`'s payload (records are asked for in order)."""
        if self.monotonic:
            return str(index).encode()
        if self._chunk is None or self._handed == len(self._chunk):
            self._chunk_start_rng = copy.copy(self.rng)
            self._chunk = self._draw_rows(self.rng, self.chunk_records)
            self._handed = 0
        self._handed += 1
        return self._chunk[self._handed - 1]

    def next_double(self) -> float:
        """Draw Java's commit-point `nextDouble()` from the position after the last payload."""
        if self._chunk is not None and self._handed < len(self._chunk):
            self.rng = copy.copy(self._chunk_start_rng)
            if self._handed:
                self._draw(self.rng, self._handed)
        self._chunk = None
        return self.rng.next_double()

    def mean_payload_bytes(self) -> float:
        """Average payload size, for throughput in MB/s."""
        if self.record_size is not None:
            return float(self.record_size)
        if self.payload_list:
            return float(np.mean([len(p) for p in self.payload_list]))
        return 7.0
