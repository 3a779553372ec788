"""The CLI's screens as renderables: model, tool and human text is shown literally; the approval screen says
what changed and why it is asked again; checkpoint ids are shown as prefixes `rollback` accepts."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console, RenderableType

from planmode.cli.app import resolve_snapshot
from planmode.cli.ui import (
    approval_screen,
    changes_view,
    plan_table,
    render_event,
    snapshot_table,
    unique_prefixes,
)
from planmode.errors import PlanModeError
from planmode.persistence.snapshots import Snapshot
from planmode.state.diff import plan_changes
from planmode.state.models import Plan

HOSTILE = [
    "dict[str, list[int]]",
    "[/b]",
    "[bold]",
    "pip install 'planmode[postgres]'",
    ":thumbs_up:",
    "[link=http://x]y[/link]",
]


def text_of(renderable: RenderableType) -> str:
    """What a terminal shows, through a console that WOULD read markup, emoji codes and highlighting if it
    were given plain strings: only `Text` survives it literally."""
    buf = io.StringIO()
    Console(file=buf, width=400, markup=True, emoji=True, highlight=True, color_system=None).print(renderable)
    return buf.getvalue()


def hostile_plan() -> Plan:
    return Plan.model_validate(
        {
            "goal": "g [bold]",
            "title": "Types [/b] dict[str, list[int]]",
            "steps": [
                {"id": "a", "description": "annotate as dict[str, list[int]]", "acceptance": "[/b] closes"},
                {
                    "id": "b",
                    "description": "pip install 'planmode[postgres]' :thumbs_up:",
                    "dependencies": ["a"],
                    "acceptance": "[link=http://x]y[/link]",
                },
            ],
        }
    )


def test_the_plan_table_shows_markup_like_text_literally() -> None:
    out = text_of(plan_table(hostile_plan()))
    for s in [
        "dict[str, list[int]]",
        "[/b] closes",
        "pip install 'planmode[postgres]' :thumbs_up:",
        "[link=http://x]y[/link]",
        "Types [/b] dict[str, list[int]]",
    ]:
        assert s in out


@pytest.mark.parametrize(
    "kind",
    [
        "plan_created",
        "step_started",
        "step_completed",
        "step_failed",
        "reflection",
        "plan_patched",
        "patch_rejected",
        "direct_answer",
        "plan_rejected",
        "plan_cancelled",
    ],
)
@pytest.mark.parametrize("hostile", HOSTILE)
def test_every_event_shows_its_text_literally(kind: str, hostile: str) -> None:
    event: dict[str, Any] = {
        "source": "planmode",
        "type": kind,
        "message": hostile,
        "step_id": "s[/b]",
        "plan_version": 2,
        "data": {"assessment": "on_track", "added": ["x[bold]"]},
    }
    out = text_of(render_event(event))
    assert hostile in out and "s[/b]" in out
    if kind == "plan_patched":
        assert "x[bold]" in out


def test_the_approval_screen_shows_the_reason_the_changes_and_the_refusal_literally() -> None:
    plan = hostile_plan()
    payload = {
        "plan": plan.model_dump(mode="json"),
        "revision": plan.revision,
        "error": "stale [/b] revision",
        "reason": "re-approval after a patch: tests [bold] failed",
        "changes": {
            "since_revision": "abc123",
            "added": ["b"],
            "removed": ["old[/b]"],
            "reordered": True,
            "updated": {
                "a": {
                    "description": ["annotate [bold]", "annotate as dict[str, list[int]]"],
                    "dependencies": [[], ["x"]],
                }
            },
        },
    }
    out = text_of(approval_screen(payload))
    assert "Asked again: re-approval after a patch: tests [bold] failed" in out
    assert "previous answer refused: stale [/b] revision" in out
    assert "Changes since revision abc123:" in out
    assert "+ added b: pip install 'planmode[postgres]' :thumbs_up:" in out
    assert "~ updated a" in out
    assert "description: annotate [bold] → annotate as dict[str, list[int]]" in out
    assert "dependencies: [] → [x]" in out
    assert "- removed old[/b]" in out
    assert "steps reordered" in out


def test_an_initial_plan_has_no_reason_line_and_no_changes() -> None:
    plan = hostile_plan()
    payload = {
        "plan": plan.model_dump(mode="json"),
        "revision": plan.revision,
        "error": None,
        "reason": "initial plan",
        "changes": None,
    }
    out = text_of(approval_screen(payload))
    assert "Asked again" not in out and "Changes since" not in out and "refused" not in out


@pytest.mark.parametrize(
    "changes",
    [
        None,
        {},
        {"added": [], "removed": [], "updated": {}, "reordered": False},
        "garbage",
        {"updated": "garbage", "added": ["n"]},
    ],
)
def test_changes_view_is_total(changes: Any) -> None:
    view = changes_view(changes)
    if isinstance(changes, dict) and changes.get("added"):
        assert view is not None and "+ added n" in text_of(view)
    else:
        assert view is None


def test_plan_changes_has_the_payload_shape() -> None:
    old = Plan.model_validate(
        {
            "goal": "g",
            "steps": [
                {"id": "a", "description": "A"},
                {"id": "b", "description": "B"},
                {"id": "c", "description": "C"},
            ],
        }
    )
    new = Plan.model_validate(
        {
            "goal": "g",
            "steps": [
                {"id": "b", "description": "B2", "acceptance": "ok"},
                {"id": "a", "description": "A"},
                {"id": "d", "description": "D"},
            ],
        }
    )
    changes = plan_changes(old, new)
    assert changes == {
        "since_revision": old.revision,
        "added": ["d"],
        "removed": ["c"],
        "updated": {"b": {"description": ["B", "B2"], "acceptance": ["", "ok"]}},
        "reordered": True,
    }


def test_unique_prefixes_are_unique_and_at_least_8_characters() -> None:
    ids = ["1f0c8a2e-5b3d-6c7e-8001-aaaa", "1f0c8a2e-5b3d-6c7e-8002-bbbb", "1f0c9000-0000-0000-0000-cccc"]
    prefixes = unique_prefixes(ids)
    assert prefixes[ids[2]] == "1f0c9000"
    assert prefixes[ids[0]] == "1f0c8a2e-5b3d-6c7e-8001" and prefixes[ids[1]] == "1f0c8a2e-5b3d-6c7e-8002"
    for cid, p in prefixes.items():
        assert [i for i in ids if i.startswith(p)] == [cid]


def test_resolve_snapshot_accepts_n_ids_and_unique_prefixes_git_style() -> None:
    ids = ["1f0c8a2e-5b3d-6c7e-8001-aaaa", "1f0c8a2e-5b3d-6c7e-8002-bbbb", "1f0c9000-0000-0000-0000-cccc"]
    assert resolve_snapshot(ids, "2") == ids[1]  # the # of history: the second checkpoint of the thread
    assert resolve_snapshot(ids, "1f0c9") == ids[2]
    assert resolve_snapshot(ids, ids[0]) == ids[0]
    assert resolve_snapshot(ids, "1f0c8a2e-5b3d-6c7e-8002") == ids[1]
    with pytest.raises(PlanModeError, match="ambiguous"):
        resolve_snapshot(ids, "1f0c8a2e")
    with pytest.raises(PlanModeError, match="no snapshot"):
        resolve_snapshot(ids, "ffff")
    with pytest.raises(PlanModeError, match="no snapshot #4"):
        resolve_snapshot(ids, "4")


def test_the_snapshot_table_at_80_columns_never_cuts_a_checkpoint_prefix() -> None:
    ids = [f"1f0c8a2e-5b3d-6c7e-80{n:02d}-{n:012x}" for n in range(12)]
    snaps = [
        Snapshot(
            checkpoint_id=cid,
            parent_id=None,
            created_at=None,
            step=n,
            label="a long label [bold] that wraps " * 3,
            plan_version=1,
            counts={"done": n, "pending": 2},
            next=(),
            awaiting_approval=False,
            config={},
            source="loop",
            status="running",
        )
        for n, cid in enumerate(ids)
    ]
    buf = io.StringIO()
    Console(file=buf, width=80, color_system=None).print(snapshot_table(snaps))
    out = buf.getvalue()
    prefixes = unique_prefixes(ids)
    for p in prefixes.values():
        assert p in out  # whole, on one line: it can be typed back
    assert "[bold]" in out
