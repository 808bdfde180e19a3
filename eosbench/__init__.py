"""eosbench: benchmark and soak-test harness for exactly-once Kafka + Spark pipelines."""

__version__ = "0.1.0"
