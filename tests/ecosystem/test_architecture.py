"""The import rules of docs/architecture.md ("Modules and the direction of their imports"), enforced.

Every module of src/planmode is parsed with `ast`; every import of a planmode module (at the top, inside a
function, under TYPE_CHECKING) is checked against the layers below. The checker itself is tested on
synthetic violations, so a rule that silently stopped matching would show.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

#: Layer of each module (by dotted prefix; the longest matching prefix wins). Lower layers never import higher.
LAYERS: dict[str, int] = {
    # 0: leaves, importing nothing of planmode
    "planmode._compat": 0,  # the seam with LangGraph's private names
    "planmode.errors": 0,
    "planmode.prompts": 0,
    "planmode.context": 1,  # the settings: checked with planmode.errors; the state holds them
    "planmode.persistence._savers": 0,
    "planmode.persistence._saves": 0,
    "planmode.persistence.rows": 0,  # read by `planmode ls` without LangGraph
    "planmode.llm.trim": 0,
    "planmode.observability.usage": 2,
    "planmode.observability.events": 2,
    "planmode.budget": 2,
    "planmode.budget.estimate": 2,
    "planmode.approval.policy": 2,
    "planmode.approval.staleness": 2,
    "planmode.plan_png": 2,
    "planmode.persistence._sqlite_saver": 2,
    "planmode.tools._writes": 2,
    "planmode.approval.approver": 2,
    "planmode.text": 0,
    "planmode._cache": 0,
    "planmode._drive": 0,
    "planmode._packed": 0,  # the plan's packed checkpoint form: read by `ls` without the state package
    "planmode.approval_key": 0,
    # 1: the plan, its rules, the reducer and the graph state
    "planmode.state": 1,
    # 2: services: the model layer, tools, the approval protocol, persistence, snapshots, runs, edits
    "planmode.llm": 2,
    "planmode.observability": 2,
    "planmode.tools.loop": 2,
    "planmode.executors": 2,
    "planmode.tools": 2,
    "planmode.approval": 2,
    "planmode.persistence": 2,
    "planmode.persistence.lease": 2,
    "planmode.persistence.alease": 2,
    "planmode.persistence.snapshots": 2,
    "planmode.persistence.runs": 2,
    "planmode.persistence.edit": 2,
    "planmode.persistence._pg_fence": 2,
    "planmode.local_server": 2,
    "planmode.sandbox": 2,  # the one place that runs a command (checks, probes)
    "planmode.checks": 2,  # running a step's declared checks (in the sandbox)
    "planmode.testing": 2,
    # 3: the nodes; 4: the graph; 5: embedding in a parent agent; 6: the public API; 7: the CLI
    "planmode.nodes": 3,
    "planmode.adapters": 2,  # the registry: the core loads an adapter only by name (adapter_for)
    "planmode.adapters.small_models": 3,  # opt-in help for small models, never imported by the core
    "planmode.graph": 4,
    "planmode.agent_tool": 5,
    "planmode.middleware": 5,
    "planmode.policy": 6,  # a shim: an old path kept importable
    "planmode.lease": 6,  # a shim: an old path kept importable
    "planmode.alease": 6,  # a shim: an old path kept importable
    "planmode.runs": 6,  # a shim: an old path kept importable
    "planmode.snapshots": 6,  # a shim: an old path kept importable
    "planmode.edit": 6,  # a shim: an old path kept importable
    "planmode.events": 6,  # a shim: an old path kept importable
    "planmode.usage": 6,  # a shim: an old path kept importable
    "planmode": 6,
    "planmode.cli": 7,
}
LEAF, STATE = 0, 1
#: What state/ may import outside itself.
STATE_MAY_IMPORT = (
    "planmode.errors",
    "planmode.text",
    "planmode._drive",
    "planmode._packed",
    "planmode.approval_key",
    "planmode._compat",
    "planmode.context",
)


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def resolve(name: str, known: set[str]) -> str:
    """``from planmode import prompts`` imports the module planmode.prompts, not the package."""
    return name if name in known else name.rsplit(".", 1)[0] if "." in name else name


def imports_of(path: Path, module: str, known: set[str]) -> set[str]:
    """The planmode modules ``path`` imports (absolute, relative, and names imported from a package)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "planmode")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if target.split(".")[0] != "planmode":
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in known else target)
    return {resolve(name, known) for name in found} - {module}


def import_graph(root: Path) -> dict[str, set[str]]:
    paths = {module_name(p, root): p for p in sorted((root / "planmode").rglob("*.py"))}
    known = set(paths)
    return {mod: imports_of(path, mod, known) for mod, path in paths.items()}


def layer_of(module: str) -> int | None:
    """The layer of ``module``; None when it is in none (the package ``planmode`` matches itself only)."""
    best: str | None = None
    for prefix in LAYERS:
        below = prefix != "planmode" and module.startswith(prefix + ".")
        if (module == prefix or below) and (best is None or len(prefix) > len(best)):
            best = prefix
    return LAYERS[best] if best is not None else None


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def is_node_module(module: str) -> bool:
    """A module of one node (planmode.nodes.<name>), as opposed to the package and its private modules."""
    parts = module.split(".")
    return len(parts) == 3 and parts[:2] == ["planmode", "nodes"] and not parts[2].startswith("_")


def violations(graph: Mapping[str, set[str]]) -> list[str]:
    """Every broken rule, as a sentence naming the importing module and the import."""
    out: list[str] = []
    for module, imported in sorted(graph.items()):
        layer = layer_of(module)
        if layer is None:
            out.append(
                f"{module} is in no layer: add it to LAYERS in tests/ecosystem/test_architecture.py and to the diagram"
            )
            continue
        for target in sorted(imported):
            target_layer = layer_of(target)
            if target_layer is None:
                out.append(f"{module} imports {target}, which is in no layer")
            elif layer == LEAF and target != "planmode._compat":
                out.append(f"{module} is a leaf and imports {target}: leaves import nothing of planmode")
            elif layer == STATE and not (_within(target, "planmode.state") or target in STATE_MAY_IMPORT):
                out.append(f"{module} imports {target}: state/ imports only state/ and {', '.join(STATE_MAY_IMPORT)}")
            elif target_layer > layer:
                out.append(f"{module} (layer {layer}) imports {target} (layer {target_layer}): imports point down")
            elif _within(module, "planmode.nodes") and module != "planmode.nodes" and is_node_module(target):
                out.append(f"{module} imports the node module {target}: nodes share code through nodes/_*.py")
    return out


# -- the rules hold in src/planmode ----------------------------------------------------------------------


def test_src_planmode_follows_the_import_rules() -> None:
    graph = import_graph(SRC)
    assert "planmode.state.reducer" in graph and "planmode.nodes.patch" in graph  # the parser found the tree
    assert violations(graph) == []


def test_the_parser_sees_the_imports_that_matter() -> None:
    graph = import_graph(SRC)
    assert "planmode.prompts" in graph["planmode.nodes.detect"]  # `from planmode import prompts`
    assert "planmode.state.draft" in graph["planmode.nodes.patch"]
    assert "planmode.cli.demo" in graph["planmode.cli.app"]  # an import inside a function
    assert graph["planmode.errors"] == set()


# -- the checker fails on a broken rule ------------------------------------------------------------------

BROKEN = [
    ({"planmode.state.models": {"planmode.nodes.plan"}}, "state/ imports only state/"),
    ({"planmode.executors": {"planmode.graph"}}, "imports point down"),
    ({"planmode.state.reducer": {"planmode.observability.events"}}, "state/ imports only state/"),
    ({"planmode.errors": {"planmode.state"}}, "leaves import nothing"),
    ({"planmode.nodes.patch": {"planmode.nodes.plan"}}, "the node module planmode.nodes.plan"),
    ({"planmode.nodes._task": {"planmode.nodes.dispatch"}}, "the node module planmode.nodes.dispatch"),
    ({"planmode.nodes.verify": {"planmode.graph.routing"}}, "imports point down"),
    ({"planmode.graph.builder": {"planmode.cli.app"}}, "imports point down"),
    ({"planmode.llm": {"planmode.nodes"}}, "imports point down"),
    ({"planmode.demo": {"planmode.cli.drive"}}, "is in no layer"),
    ({"planmode.persistence.runs": {"planmode.brand_new"}}, "which is in no layer"),
]


@pytest.mark.parametrize(("graph", "message"), BROKEN, ids=[next(iter(g)) + "->" for g, _ in BROKEN])
def test_the_checker_reports_a_synthetic_violation(graph: dict[str, set[str]], message: str) -> None:
    found = violations(graph)
    assert len(found) == 1 and message in found[0], found


def test_the_checker_allows_what_the_rules_allow() -> None:
    allowed = {
        "planmode.nodes": {"planmode.nodes.plan", "planmode.nodes._deps"},  # the package lists its nodes
        "planmode.nodes.patch": {"planmode.nodes._repair", "planmode.state.draft", "planmode.llm"},
        "planmode.graph.routing": {"planmode.nodes.dispatch"},
        "planmode.state.parse": {"planmode.errors", "planmode.state.models"},
        "planmode.cli.app": {"planmode.graph", "planmode.cli.demo"},
    }
    assert violations(allowed) == []


def test_the_checker_reads_a_synthetic_source_tree(tmp_path: Path) -> None:
    """Relative imports, imports inside functions and names imported from the package, in real files."""
    pkg = tmp_path / "planmode"
    for folder in (pkg, pkg / "state", pkg / "nodes"):
        folder.mkdir(exist_ok=True)
        (folder / "__init__.py").write_text("")
    (pkg / "prompts.py").write_text("X = 1\n")
    (pkg / "state" / "models.py").write_text("def f():\n    from ..nodes import plan\n    return plan\n")
    (pkg / "nodes" / "plan.py").write_text("from planmode import prompts\n")
    (pkg / "nodes" / "patch.py").write_text("from . import plan\nfrom .plan import X\n")
    graph = import_graph(tmp_path)
    assert graph["planmode.nodes.plan"] == {"planmode.prompts"}
    assert graph["planmode.nodes.patch"] == {"planmode.nodes.plan"}
    assert graph["planmode.state.models"] == {"planmode.nodes.plan"}
    found = violations(graph)
    assert any(v.startswith("planmode.state.models imports planmode.nodes.plan") for v in found), found
    assert any(v.startswith("planmode.nodes.patch imports the node module") for v in found), found
