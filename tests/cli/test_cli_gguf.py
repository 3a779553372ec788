"""``--gguf`` checks the file before any server starts: a missing path or a file that is not a GGUF model (no
``GGUF`` magic bytes) is one line on stderr and exit 2, with or without the ``local`` extra installed, and
"starting a llama.cpp server" is never printed for it (issue 23, item 10)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def _run(tmp_path: Path, model: Path, *, block_extra: bool = True) -> subprocess.CompletedProcess[str]:
    # block_extra: llama_cpp blocked in sys.modules, the interpreter behaves as one without the `local` extra;
    # otherwise the extra is reported present (as in a venv with it): a server would be started for the file
    block = (
        "sys.modules['llama_cpp'] = None; "
        if block_extra
        else "import planmode.local_server as ls; ls.missing_server_modules = lambda: []; "
    )
    args = ["planmode", "run", "x", "--gguf", str(model), "--db", str(tmp_path / "r.sqlite")]
    args += ["--workspace", str(tmp_path), "--auto-approve"]
    code = f"import sys; {block}from planmode.cli import main; sys.argv = {args!r}; main()"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "PLANMODE_"))}
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "COLUMNS": "200"},
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("block_extra", [True, False])
def test_a_missing_gguf_path_is_named_before_the_extra_is_checked(tmp_path: Path, block_extra: bool) -> None:
    proc = _run(tmp_path, tmp_path / "nope.gguf", block_extra=block_extra)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "no GGUF model file at" in proc.stderr and "nope.gguf" in proc.stderr
    assert "does not exist" in proc.stderr
    assert "pip install" not in proc.stderr  # the path comes first: installing the extra would not help
    assert "starting a llama.cpp server" not in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not (tmp_path / "r.sqlite").exists()  # nothing stored


@pytest.mark.parametrize("block_extra", [True, False])
def test_a_file_that_is_not_a_gguf_model_is_refused_by_its_magic(tmp_path: Path, block_extra: bool) -> None:
    model = tmp_path / "notes.gguf"
    model.write_text("# not a model\n")
    proc = _run(tmp_path, model, block_extra=block_extra)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "is not a GGUF model file" in proc.stderr and "notes.gguf" in proc.stderr
    assert "starting a llama.cpp server" not in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


def test_a_folder_is_not_a_gguf_model(tmp_path: Path) -> None:
    folder = tmp_path / "model.gguf"
    folder.mkdir()
    proc = _run(tmp_path, folder)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "it is a folder" in proc.stderr


def test_check_gguf_accepts_the_magic() -> None:
    import tempfile

    from planmode.local_server import check_gguf

    with tempfile.NamedTemporaryFile(suffix=".gguf") as fh:
        fh.write(b"GGUF\x03\x00\x00\x00")
        fh.flush()
        assert check_gguf(fh.name) == Path(fh.name)
