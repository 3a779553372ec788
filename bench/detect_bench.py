"""How well `detect` routes requests: the heuristic alone, and the whole detector with a scripted classifier.

    python -m bench.detect_bench [--out bench/results/detect.json]

The labelled set is ``tests/graph/data/detect_requests.jsonl`` (English, French, German and Spanish; "plan" for
requests that need a multi-step plan, "direct" for trivial ones; labels are ours). Reported:

- the heuristic's decisions: how many requests it decides without a model call, how many of those are right,
  and how many plan-worthy requests it sends direct (the costly mistake: a one-line answer to a real task);
- the whole detector, run through the real graph (``build_graph`` with an in-memory checkpointer), with two
  scripted classifiers: ``oracle`` answers the label (so every error left is the heuristic's), and
  ``always_plan`` is the scripted model's default answer (``needs_plan: true``, what an unsure classifier
  should fall back to: the plan is shown before anything runs).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver

from planmode.context import PlanModeContext
from planmode.graph import build_graph
from planmode.nodes import heuristic_decision
from planmode.persistence import planmode_serializer
from planmode.testing.scripted import PurposeScript, ScriptedChatModel, ScriptRequest

DATA = Path(__file__).resolve().parents[1] / "tests" / "graph" / "data" / "detect_requests.jsonl"
OUT = Path(__file__).resolve().parent / "results" / "detect.json"
PLAN = {"title": "t", "steps": [{"id": "a", "description": "do a"}]}


def load(path: Path = DATA) -> list[dict[str, str]]:
    """The labelled requests."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def heuristic_report(rows: list[dict[str, str]]) -> dict[str, Any]:
    """The heuristic on its own: decided share, accuracy where it decides, wrong "direct" answers."""
    decided = correct = plan_sent_direct = 0
    for row in rows:
        d = heuristic_decision(row["text"])
        if d is None:
            continue
        decided += 1
        correct += (d is True) == (row["label"] == "plan")
        plan_sent_direct += d is False and row["label"] == "plan"
    return {
        "decided": decided,
        "decided_share": round(decided / len(rows), 3),
        "accuracy_where_decided": round(correct / decided, 3) if decided else None,
        "accuracy_counting_unsure_as_wrong": round(correct / len(rows), 3),
        "plan_worthy_sent_direct": plan_sent_direct,
    }


def detector_report(rows: list[dict[str, str]], classifier: str) -> dict[str, Any]:
    """The whole detector through the real graph, with a scripted classifier (``oracle`` or ``always_plan``)."""
    labels = {row["text"]: row["label"] for row in rows}

    def classify(req: ScriptRequest) -> dict[str, Any]:
        if classifier == "always_plan":
            return {"needs_plan": True, "reason": "scripted default"}
        asked = str(req.messages[-1].content).strip()  # the human message: the request itself
        return {"needs_plan": labels[asked] == "plan", "reason": "oracle"}

    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN, detect=classify, respond="ok"))
    graph = build_graph(model, checkpointer=InMemorySaver(serde=planmode_serializer()))
    correct = 0
    wrong: list[str] = []
    for n, row in enumerate(rows):
        cfg: Any = {"configurable": {"thread_id": f"r{n}"}}
        graph.invoke({"messages": [("user", row["text"])]}, cfg, context=PlanModeContext(mode="auto"))
        route = graph.get_state(cfg).values.get("route")
        ok = (route == "plan") == (row["label"] == "plan")
        correct += ok
        if not ok:
            wrong.append(row["text"])
    calls = model.calls("detect")
    return {
        "accuracy": round(correct / len(rows), 3),
        "classifier_calls": calls,
        "decided_without_a_model_call": round(1 - calls / len(rows), 3),
        "wrong": wrong,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.detect_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    rows = load()
    result = {
        "requests": len(rows),
        "by_language": dict(Counter(r["lang"] for r in rows)),
        "by_label": dict(Counter(r["label"] for r in rows)),
        "heuristic": heuristic_report(rows),
        "detector": {name: detector_report(rows, name) for name in ("oracle", "always_plan")},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
