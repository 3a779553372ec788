"""tests/graph/nodes: the nodes (src/planmode/nodes/): detect, plan, approve, dispatch, execute_step, verify, reflect,
patch, finalize, through the compiled graph,
with the scripted model."""
