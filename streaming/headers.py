"""The headers the sinks stamp on every output record, and how the transaction's identity is spelt.

`eos.src` (`topic:partition:offset` of the input record) and `eos.in_ts` (its input timestamp)
are on every sink's records. The transactional sink adds its transaction's identity and size:

- `eos.txn` = `<input partition>:<batch>:<attempt token>`: the input partition the transaction covers
  (`*` in batch scope, where one transaction covers them all), the micro-batch id, and a random
  60-bit token drawn afresh for every attempt. The token is what makes an identity
  unique: a retried attempt of one (partition, batch), a Spark task retry, a replay after a driver
  crash and a batch id reused after the checkpoint was deleted each write under a new one, so a
  committed transaction is never counted together with an earlier attempt (aborted, and hidden
  from read_committed anyway) or with another commit of the same batch (a duplicate).
- `eos.txn_records` = how many records that transaction wrote to this record's topic (the
  output and the dead-letter topic each carry their own count), so a topic can be checked
  all-or-nothing on its own.
"""

from __future__ import annotations

import secrets

SRC_HEADER = "eos.src"
IN_TS_HEADER = "eos.in_ts"
TXN_HEADER = "eos.txn"
TXN_RECORDS_HEADER = "eos.txn_records"
BATCH_SCOPE_PARTITION = "*"


def transaction_identity(partition: int | None, batch_id: int) -> bytes:
    """A new `eos.txn` value for one attempt of a transaction (partition None: batch scope)."""
    covered = BATCH_SCOPE_PARTITION if partition is None else partition
    return f"{covered}:{batch_id}:{secrets.randbits(60):015x}".encode()


def attempt_token(identity: bytes) -> int:
    """The attempt's random token, the integer a verifier keeps for an `eos.txn` value."""
    return int(identity.rsplit(b":", 1)[1], 16)
