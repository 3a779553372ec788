"""A throwaway PostgreSQL server on 127.0.0.1, for tests and benchmarks.

    with postgres_server() as url:          # "postgresql://planmode@127.0.0.1:PORT/planmode", or None
        saver = postgres_checkpointer(url)

Uses the server binaries of Debian's ``postgresql`` package (``apt-get install postgresql``). PostgreSQL
refuses to run as root, so as root the server runs as the ``postgres`` user. The data folder is removed and
the server stopped when the block ends. Yields None when the binaries are not installed.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["postgres_bin", "postgres_server"]


def postgres_bin() -> Path | None:
    """The newest installed PostgreSQL server ``bin`` folder, or None."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
    return found[-1].parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def postgres_server(url: str | None = None, *, prefix: str = "planmode-pg-") -> Iterator[str | None]:
    """Yield ``url`` when given; else start a server in a temporary folder and yield its URL."""
    if url:
        yield url
        return
    bindir = postgres_bin()
    if bindir is None:
        yield None
        return
    root = Path(tempfile.mkdtemp(prefix=prefix))
    data = root / "data"
    as_root = os.geteuid() == 0
    if as_root:
        root.chmod(0o755)
        shutil.chown(root, user="postgres")

    def run(*args: str) -> None:
        cmd = ["runuser", "-u", "postgres", "--", *args] if as_root else list(args)
        subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120)

    port = _free_port()
    started = False
    try:
        run(str(bindir / "initdb"), "-D", str(data), "-U", "planmode", "--auth=trust", "-E", "UTF8")
        run(
            str(bindir / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(root / "server.log"),
            "-w",
            "-t",
            "60",
            "-o",
            f"-h 127.0.0.1 -p {port} -k {root} -c fsync=off -c max_connections=200",
            "start",
        )
        started = True
        run(str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "planmode", "planmode")
        yield f"postgresql://planmode@127.0.0.1:{port}/planmode"
    finally:
        if started:
            subprocess.run(
                [
                    *(["runuser", "-u", "postgres", "--"] if as_root else []),
                    str(bindir / "pg_ctl"),
                    "-D",
                    str(data),
                    "-m",
                    "fast",
                    "-w",
                    "stop",
                ],
                check=False,
                capture_output=True,
                timeout=120,
            )
        shutil.rmtree(root, ignore_errors=True)
