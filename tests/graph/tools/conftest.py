"""tests/graph/tools: the tool loop and the workspace tools (src/planmode/tools/),
with the scripted model."""
