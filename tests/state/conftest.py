"""tests/state: the plan model, the pure patch rules and the reducer, without a graph or a model (unit tests,
deterministic; property tests use the Hypothesis profile chosen in tests/conftest.py)."""
