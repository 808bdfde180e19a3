"""The producing engine: seeded transactional writes that fill the input topics."""
