"""The Structured Streaming engine: session, source, sinks and verifier (runs under spark-submit)."""
