"""The question catalogue: each question beside its claims, its arms and baselines. Imports the engine (sweep
files) and the verdicts wing."""
