"""The configuration file: run settings that would otherwise be flags or environment variables, kept with a project.

The file is the nearest, from a folder (the workspace of ``run``, the current folder for the other commands) up to
the root, of: ``planmode.toml`` (its top-level keys), or a ``pyproject.toml`` that has a ``[tool.planmode]`` table
(a ``pyproject.toml`` without one is passed by). A folder's ``planmode.toml`` wins over its ``pyproject.toml``.

- Keys: every setting ``planmode run`` offers (``model``, ``base_url``, ``mode``, ``max_parallel``,
  ``check_commands``, ``sandbox``, ...; ``max-parallel`` is read as ``max_parallel``), and ``db`` (relative to the
  file's folder). A flag beats an environment variable, which beats the file, which beats the default.
- An unknown key, a value of the wrong type or out of range: `PlanModeError` naming the file and the key.
- Secrets are never read from it (`SECRET_KEYS`): a repository's file is not a secret store.
- A server it names is on this machine (`LOCAL_HOSTS`): ``base_url`` and a ``postgresql://`` ``db`` from a file
  must be loopback. A repository someone else wrote cannot send the user's API key (which the model client sends
  to ``base_url``), or the run's task and outputs, to a server of its own; a flag or variable may name any.
- A file cannot loosen what guards the user (`planmode.context.TIGHTEN_ONLY`: approval, the sandbox, the checks and
  the commands they may run, the budget, git writes): such a value must be looser than nothing the defaults
  allow, else it is refused, naming the flag or variable that sets it. A repository someone else wrote then cannot
  switch off the sandbox of the person who runs planmode in it.

Start-up: this module imports the standard library only (and the settings' dataclass when a file is read).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from planmode.errors import PlanModeError

__all__ = ["CONFIG_FILE", "SECRET_KEYS", "Config", "find_config", "load_config"]

CONFIG_FILE = "planmode.toml"
#: Keys that hold secrets: refused in a configuration file, wherever it is.
SECRET_KEYS = frozenset(
    {"api_key", "openai_api_key", "approval_key", "approval_key_file", "password", "token", "secret", "key"}
)
#: Keys a file sets besides the run settings.
_OTHER_KEYS = frozenset({"db"})


@dataclass(frozen=True)
class Config:
    """What a configuration file sets."""

    path: Path | None = None
    """The file (None: there is none)."""
    settings: dict[str, Any] = field(default_factory=dict)
    """Run settings by `PlanModeContext` field name."""
    db: str | None = None
    """The database (a path made absolute against the file's folder, or a postgresql:// URL)."""


def find_config(start: Path | None = None) -> tuple[Path, dict[str, Any]] | None:
    """The nearest configuration file from ``start`` (the current folder) upward, with its table; None when no
    folder has one. A file that is not TOML is a `PlanModeError` naming it."""
    here = (start or Path.cwd()).absolute()
    for folder in (here, *here.parents):
        own = folder / CONFIG_FILE
        if own.is_file():
            return own, _read(own)
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file():
            tool = _read(pyproject).get("tool")
            table = tool.get("planmode") if isinstance(tool, dict) else None
            if table is not None:
                if not isinstance(table, dict):
                    raise PlanModeError(f"{pyproject}: tool.planmode must be a table ([tool.planmode])")
                return pyproject, table
    return None


def _read(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise PlanModeError(f"{path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise PlanModeError(f"{path}: cannot read it: {exc.strerror or exc}") from None


def load_config(start: Path | None = None) -> Config:
    """The checked configuration of the nearest file from ``start`` upward (`find_config`); empty when none."""
    found = find_config(start)
    if found is None:
        return Config()
    path, table = found
    settings: dict[str, Any] = {}
    db: str | None = None
    offered = _offered()
    for raw, value in table.items():
        key = str(raw).replace("-", "_")
        where = f"{path}: {raw}"
        if key in SECRET_KEYS or key.endswith(("_key", "_token", "_password", "_secret")):
            raise PlanModeError(f"{where}: a secret is not read from a configuration file; set it in the environment")
        if key in ("db", "base_url") and isinstance(value, str) and "://" in value:
            _local(where, value)
        if key == "db":
            if not isinstance(value, str) or not value:
                raise PlanModeError(f"{where}: expected a path or a postgresql:// URL, got {value!r}")
            db = value if "://" in value else str((path.parent / Path(value).expanduser()).absolute())
            continue
        if key not in offered:
            import difflib

            near = difflib.get_close_matches(key, sorted({*offered, *_OTHER_KEYS}), n=1)
            hint = f"did you mean {near[0]}? " if near else ""
            raise PlanModeError(f"{where}: unknown key ({hint}the keys are run's settings, see `planmode run --help`)")
        settings[key] = _checked(where, key, value, *offered[key])
    return Config(path=path, settings=settings, db=db)


#: The hosts a configuration file may name a server on: this machine.
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


def _local(where: str, url: str) -> None:
    """Refuse a URL from a configuration file whose server is not on this machine (module docstring)."""
    from urllib.parse import urlsplit

    try:
        host = (urlsplit(url).hostname or "").lower()
    except ValueError:
        host = ""
    if host not in LOCAL_HOSTS and not _loopback_address(host):
        raise PlanModeError(
            f"{where}: a configuration file may name only a server on this machine (localhost, 127.0.0.1); "
            f"{host or url!r} is not. Pass it as a flag or an environment variable if you trust it"
        )


def _loopback_address(host: str) -> bool:
    """Whether ``host`` is an IP address of this machine's loopback (``127.0.0.2``, ``::1``), not a name."""
    import ipaddress

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _offered() -> dict[str, tuple[Any, float]]:
    """The settings a file may set, by name: those ``planmode run`` offers as options, with their type and the
    smallest number ``run`` accepts for them (`planmode.cli.run._CLI_MIN` and the field's ``min``)."""
    import typing

    from planmode.cli.run import _CLI_MIN as CLI_MIN
    from planmode.cli.run import _setting_fields as setting_fields
    from planmode.context import PlanModeContext

    hints = typing.get_type_hints(PlanModeContext)
    return {f.name: (hints[f.name], CLI_MIN.get(f.name, f.metadata.get("min", 0))) for f in setting_fields()}


def _checked(where: str, key: str, value: Any, hint: Any, minimum: float) -> Any:
    """``value`` when it is a valid value of setting ``key`` that loosens nothing (see the module docstring)."""
    from planmode.context import TIGHTEN_ONLY, PlanModeContext
    from planmode.context import _loosens as loosens  # the rule a resumed run's settings follow

    if hint == list[str] and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
        raise PlanModeError(f"{where}: expected a list of strings, got {value!r}")
    if hint == dict[str, Any] and not isinstance(value, dict):
        raise PlanModeError(f"{where}: expected a table, got {value!r}")
    if hint in (str, str | None) and not isinstance(value, str):
        raise PlanModeError(f"{where}: expected a string, got {value!r}")
    if hint in (int, float) and not isinstance(value, bool) and isinstance(value, int | float) and value < minimum:
        raise PlanModeError(f"{where}: must be at least {minimum}, got {value!r}")
    try:
        PlanModeContext(**{key: value})
    except PlanModeError as exc:  # ConfigurationError: the value's type or range, said by the settings
        raise PlanModeError(f"{where}: {exc}") from None
    except (TypeError, ValueError) as exc:
        raise PlanModeError(f"{where}: {exc}") from None
    if key in TIGHTEN_ONLY and loosens(key, PlanModeContext(), {key: value}):
        flag = "--" + key.replace("_", "-")
        raise PlanModeError(
            f"{where}: a configuration file may tighten this, never loosen it; pass {flag} (or its variable)"
        )
    return value
