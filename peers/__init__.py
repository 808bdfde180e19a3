"""The peer engines' sources: Kafka Streams and Flink doing the Spark job's processing (peers/jvm/).

Nothing here is Python to import: the package only carries the Java that eosbench/local/peers.py
compiles on first use, so that an installed eosbench finds it as it finds streaming/jvm/.
"""
