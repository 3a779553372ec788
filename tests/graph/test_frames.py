"""The depth of a model call (issue 22 §1): at the first plan, execute and verify call of a run, on the sync and the
async path, at most 6 planmode frames and one driver are on the stack (`bench.frames` measures it the same way:
each node's pipeline is one frame, and the node's one driver answers the model layer's loops, composed with
``yield from``)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # bench/ is a folder of the repository, not an installed package
    sys.path.insert(0, str(ROOT))

from bench.frames import PURPOSES, TARGET, run_async, run_sync  # noqa: E402


@pytest.fixture(scope="module")
def runs() -> dict[str, dict[str, Any]]:
    return {"sync": run_sync(), "async": asyncio.run(run_async())}


@pytest.mark.parametrize("path", ["sync", "async"])
@pytest.mark.parametrize("purpose", PURPOSES)
def test_a_model_call_sits_under_at_most_six_planmode_frames_and_one_driver(
    runs: dict[str, dict[str, Any]], path: str, purpose: str
) -> None:
    run = runs[path]
    assert run["status"] == "completed"
    seen = run[purpose]
    assert seen["planmode_frames"] <= TARGET["planmode_frames"], seen["planmode"]
    assert seen["drivers"] == TARGET["drivers"], seen["planmode"]
