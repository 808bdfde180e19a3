"""Real-time mode: the Java transactional writer and the Python that starts and watches it."""
