"""The logger handed to every librdkafka client of the engines (producers and streaming).

librdkafka prints retries such as "Coordinator load in progress" straight to stderr unless
given a logger; they are expected during start-up and would break the parseable output.
Set EOSBENCH_CLIENT_LOG=1 to see them.
"""

from __future__ import annotations

import logging
import os

CLIENT_LOG = logging.getLogger("eosbench.kafka_client")
if os.environ.get("EOSBENCH_CLIENT_LOG"):
    CLIENT_LOG.addHandler(logging.StreamHandler())
    CLIENT_LOG.setLevel(logging.DEBUG)
else:
    CLIENT_LOG.addHandler(logging.NullHandler())
CLIENT_LOG.propagate = False
