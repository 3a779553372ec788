"""tests/graph/adapters: the small-model adapter (src/planmode/adapters/small_models/),
with the scripted model."""
