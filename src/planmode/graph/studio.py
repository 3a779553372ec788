"""The module-level graph that ``langgraph.json`` points at (LangGraph Studio, ``langgraph dev``).

Compiled without a checkpointer: the LangGraph server brings its own persistence. The model is made at run
time from the run settings and ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``; loading this module needs no key.
"""

from planmode.graph.builder import build_graph

graph = build_graph()
