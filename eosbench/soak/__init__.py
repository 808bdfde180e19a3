"""The soak: the pipeline runs on under injected faults, and exactly-once is verified after each."""
