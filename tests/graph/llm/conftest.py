"""tests/graph/llm: the model layer and the prompts (src/planmode/llm/, src/planmode/prompts.py),
with the scripted model."""
