"""tests/graph: the nodes and the compiled graph with the scripted model (planmode.testing.scripted) on real
SQLite files: detect, plan, approve, dispatch, execute, verify, reflect, patch, finalize, the tool loop, the
workspace tools and the prompts the graph sends."""
