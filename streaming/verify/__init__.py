"""Proof of exactly-once: the verifier, its checks, the live ledger, the topic index, the output's evidence and visibility."""
