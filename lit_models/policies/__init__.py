"""The training policies an axis word names (forcing, learning-rate schedule), resolved by ``registries``."""
