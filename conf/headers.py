"""The headers the sinks stamp on every output record, and how a transaction's identity and size are spelt.

`eos.src` (`topic:partition:offset` of the input record) and `eos.in_ts` (its input timestamp)
are on every sink's records. The transactional sink adds one more, `eos.txn`, with its
transaction's identity and size:

    eos.txn = <pipeline>:<input partition>:<batch>:<attempt token>:<records>

- `<pipeline>` is the sink's app id (its consumer group), so that a reader of an output topic
  that other pipelines write too can count this pipeline's records alone
  (`--starting-offsets output`); it may itself hold `:`, since the other fields are read from the
  right, and a value written before the field existed has four fields and no pipeline;
- `<input partition>` is the input partition the transaction covers (`*` in batch scope, where
  one transaction covers them all) and `<batch>` the micro-batch id;
- `<attempt token>`, 60 random bits in hex, is drawn afresh for every attempt. It is what makes
  the identity (the first three fields) unique: a retried attempt of one (partition, batch), a
  Spark task retry, a replay after a driver crash and a batch id reused after the checkpoint was
  deleted each write under a new one, so a committed transaction is never counted together with
  an earlier attempt (aborted, and hidden from read_committed anyway) or with another commit of
  the same batch (a duplicate);
- `<records>` is how many records that transaction wrote to this record's topic (the output and
  the dead-letter topic each carry their own count), so a topic is checked all-or-nothing alone.

`bench streaming`'s tx modes stamp the same `eos.txn` on their records (input partition `*`, the
unit's number as the batch), so one parser serves the verifier and both visibility observers;
the module lives in `conf/` because `producers/` and `streaming/` both write it and may not
import each other.

Identity and size share one header because every header costs its own copy per record: a
fourth header made the sink's produce() about 12 % dearer in CPU, a third about 4 %.
"""

from __future__ import annotations

import secrets

SRC_HEADER = "eos.src"
IN_TS_HEADER = "eos.in_ts"
TXN_HEADER = "eos.txn"
BATCH_SCOPE_PARTITION = "*"


def transaction_identity(pipeline: str, covered: int | str | None, batch_id: int) -> bytes:
    """A new identity for one attempt of a pipeline's transaction: its partition, `slot<k>`, or None for batch scope."""
    covered = BATCH_SCOPE_PARTITION if covered is None else covered
    return f"{pipeline}:{covered}:{batch_id}:{secrets.randbits(60):015x}".encode()


def txn_header(identity: bytes, records: int) -> tuple[str, bytes]:
    """The `eos.txn` header of a record of a transaction that wrote `records` records to its topic."""
    return TXN_HEADER, b"%s:%d" % (identity, records)


def read_txn_header(value: bytes) -> tuple[bytes, int, int]:
    """(identity, attempt token, records) from an `eos.txn` value; the token is the integer a verifier keeps."""
    identity, records = value.rsplit(b":", 1)
    return identity, int(identity.rsplit(b":", 1)[1], 16), int(records)


def txn_covered(value: bytes) -> bytes:
    """What an `eos.txn` value's transaction covered: its input partition, `slot<k>`, or `*` (batch scope)."""
    return value.rsplit(b":", 4)[-4]


def txn_pipeline(value: bytes) -> bytes | None:
    """The pipeline (app id) an `eos.txn` value names; None for a value written before it named one."""
    fields = value.rsplit(b":", 4)
    return fields[0] if len(fields) == 5 else None
