"""The local infrastructure eosbench runs on loopback: Kafka brokers, Spark standalone, Prometheus, and their processes, jars and checks."""
