"""The plan-mode graph: the builder and the Mermaid diagram."""

from planmode.graph.builder import NODE_NAMES, build_graph, build_state_graph

__all__ = ["NODE_NAMES", "build_graph", "build_state_graph", "mermaid"]


def mermaid() -> str:
    """The graph as a Mermaid diagram (generated from the compiled graph)."""
    return build_graph().get_graph().draw_mermaid()
