"""The plan's dependency graph drawn as a PNG, offline, with Pillow (``pip install 'planmode[png]'``).

The same picture as `planmode.state.mermaid` (one column per layer, left to right; a box per step, coloured
by status; an arrow per dependency), drawn locally: LangGraph's ``draw_mermaid_png`` sends the diagram to a
web rendering service by default, which a plan's text must not leave the machine for. Step text is drawn as
pixels (never interpreted): lone surrogates and control characters are replaced, long text is cut.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from types import ModuleType

from planmode.errors import ConfigurationError
from planmode.state.mermaid import layers
from planmode.state.models import Plan, StepStatus, clean_text

__all__ = ["plan_to_png"]

_FILL = {
    StepStatus.PENDING: ("#eeeeee", "#888888"),
    StepStatus.RUNNING: ("#fff3bf", "#f08c00"),
    StepStatus.DONE: ("#d3f9d8", "#2f9e44"),
    StepStatus.FAILED: ("#ffe3e3", "#e03131"),
    StepStatus.BLOCKED: ("#ffe8cc", "#e8590c"),
    StepStatus.SKIPPED: ("#f1f3f5", "#adb5bd"),
}
BOX_W, BOX_H, GAP_X, GAP_Y, MARGIN, FONT_SIZE, WRAP, LINES = 260, 86, 70, 24, 24, 13, 34, 4


def _pillow() -> tuple[ModuleType, ModuleType, ModuleType]:
    try:
        from PIL import Image, ImageDraw, ImageFont
    except ImportError:
        raise ConfigurationError(
            "drawing a plan as PNG needs Pillow: pip install 'planmode[png]' (or use --mermaid for the text)"
        ) from None
    return Image, ImageDraw, ImageFont


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else " " for c in clean_text(text))


def plan_to_png(plan: Plan, path: str | Path) -> Path:
    """Draw ``plan`` into the PNG file ``path`` (overwritten); returns the path.

    Raises:
        ConfigurationError: Pillow is not installed.
    """
    image_mod, draw_mod, font_mod = _pillow()
    font = font_mod.load_default(size=FONT_SIZE)
    columns = layers(plan) or [[]]
    rows = max(len(c) for c in columns) or 1
    width = MARGIN * 2 + len(columns) * BOX_W + (len(columns) - 1) * GAP_X
    height = MARGIN * 2 + rows * BOX_H + (rows - 1) * GAP_Y
    image = image_mod.new("RGB", (max(width, 200), max(height, 80)), "white")
    draw = draw_mod.Draw(image)
    boxes: dict[str, tuple[int, int, int, int]] = {}
    for col, ids in enumerate(columns):
        x = MARGIN + col * (BOX_W + GAP_X)
        for row, sid in enumerate(ids):
            y = MARGIN + row * (BOX_H + GAP_Y)
            boxes[sid] = (x, y, x + BOX_W, y + BOX_H)
    for step in plan.steps:
        for dep in step.dependencies:
            if dep in boxes and step.id in boxes:
                x0, y0 = boxes[dep][2], (boxes[dep][1] + boxes[dep][3]) // 2
                x1, y1 = boxes[step.id][0], (boxes[step.id][1] + boxes[step.id][3]) // 2
                draw.line([(x0, y0), (x1, y1)], fill="#555555", width=2)
                draw.polygon([(x1, y1), (x1 - 9, y1 - 5), (x1 - 9, y1 + 5)], fill="#555555")
    for step in plan.steps:
        fill, outline = _FILL[step.status]
        box = boxes[step.id]
        draw.rounded_rectangle(box, radius=8, fill=fill, outline=outline, width=2)
        head = _printable(f"{step.id} [{step.status.value}]")[:WRAP]
        room = LINES - 1 if step.checks else LINES
        body = textwrap.wrap(_printable(step.description), WRAP, max_lines=room, placeholder=" …") or [""]
        if step.checks:  # how the step is checked: the count and the first check, on the box's last line
            first = step.checks[0]
            what = first.command if first.kind == "run" else first.path
            body.append(_printable(f"checks {len(step.checks)}: {what}")[:WRAP])
        draw.text((box[0] + 8, box[1] + 6), head, fill="#111111", font=font)
        for n, line in enumerate(body):
            draw.text((box[0] + 8, box[1] + 24 + n * (FONT_SIZE + 3)), line, fill="#333333", font=font)
    out = Path(path)
    image.save(out, format="PNG")
    return out
