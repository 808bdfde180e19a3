"""The sinks: the transactional sink's driver and task, its clients, guards, start, slots and sizing, and the baselines."""
