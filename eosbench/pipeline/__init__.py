"""The pipeline one stage at a time (produce, stream, verify) and the demo that runs it end to end."""
