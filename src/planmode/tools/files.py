"""The file names a text mentions (``app.py``, ``data/in.csv``): a lexical scan, no meaning read.

The core reads no English to decide which files a step produces: that is declared (`planmode.state.checks.
declared_files`). The small-model adapter's readers of what a task or a step asks for are in
`planmode.adapters.small_models.files`.
"""

from __future__ import annotations

import re

__all__ = ["FILE_NAME", "file_names"]

_EXTENSIONS = "py|txt|csv|tsv|md|rst|json|jsonl|yaml|yml|toml|ini|cfg|html|css|js|ts|sh|sql|xml|log|dat|ipynb"
FILE_NAME = re.compile(rf"(?<![\w/.\-])((?:[\w\-]+/)*[\w\-]+\.(?:{_EXTENSIONS}))(?![\w\-]|\.\w)", re.IGNORECASE)


def file_names(text: str) -> list[str]:
    """The file names ``text`` mentions (``app.py``, ``data/in.csv``), once each, in order."""
    return list(dict.fromkeys(m.group(1) for m in FILE_NAME.finditer(text or "")))
