"""Where a Hermes home keeps things, and how Recall finds it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from dashboard.errors import ValidationError
from dashboard.hermes.conventions import MEMORY_FILE, MEMORY_FILE_BY_NAME, MEMORY_FILES, USER_FILE
from dashboard.params import whole_number

MAX_CHAR_LIMIT = 10**9  # a limit no prompt could hold; beyond it the value is a typo


@dataclass(frozen=True)
class CharLimit:
    """A memory file's limit in characters, and why config.yaml's value was not used."""

    chars: int
    problem: str | None = None


@dataclass(frozen=True)
class HermesHome:
    """One Hermes home (or one profile inside it)."""

    root: Path

    @property
    def state_db(self) -> Path:
        return self.root / "state.db"

    @property
    def memories(self) -> Path:
        return self.root / "memories"

    @property
    def user_md(self) -> Path:
        return self.memories / USER_FILE.name

    @property
    def memory_md(self) -> Path:
        return self.memories / MEMORY_FILE.name

    @property
    def config_yaml(self) -> Path:
        return self.root / "config.yaml"

    def exists(self) -> bool:
        return self.state_db.is_file()

    def profiles(self) -> dict[str, HermesHome]:
        """Named profiles under ``profiles/<name>/``, each a home of its own."""
        folder = self.root / "profiles"
        if not folder.is_dir():
            return {}
        return {
            p.name: HermesHome(p)
            for p in sorted(folder.iterdir())
            if p.is_dir() and (p / "state.db").is_file()
        }

    def config(self) -> dict:
        """``config.yaml`` as a dict; empty when missing or unreadable."""
        return self._config()[0]

    def _config(self) -> tuple[dict, str | None]:
        """The config and, when it exists but cannot be read, why."""
        try:
            data = yaml.safe_load(self.config_yaml.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}, None
        # ValueError: an integer of more than 4,300 digits.
        except (OSError, yaml.YAMLError, UnicodeDecodeError, ValueError) as exc:
            return {}, f"config.yaml cannot be read ({str(exc)[:200]})"
        return (data if isinstance(data, dict) else {}), None

    def configured_model(self) -> str | None:
        """The model a new session runs: config.yaml's ``model.default`` (today's Hermes)
        or ``model`` when it is a plain name (older configs); None when neither is set."""
        model = self.config().get("model")
        if isinstance(model, dict):
            model = model.get("default")
        return (model.strip() or None) if isinstance(model, str) else None

    def char_limit(self, name: str) -> CharLimit:
        """The character limit of ``USER.md`` or ``MEMORY.md`` from config.yaml.

        Hermes's default when the value is missing; also when it is not a positive
        whole number, and then ``problem`` says so (the page shows it).
        """
        kind = MEMORY_FILE_BY_NAME[name]
        key, default = kind.limit_key, kind.default_limit
        config, unreadable = self._config()
        if unreadable:
            return CharLimit(
                default, f"{unreadable}: counting against Hermes's default {default:,}"
            )
        memory = config.get("memory")
        value = memory.get(key) if isinstance(memory, dict) else None
        if value is None:
            return CharLimit(default)
        number = _positive_int(value)
        if number is None:
            shown = repr(value)[:40]
            return CharLimit(
                default,
                f"config.yaml memory.{key} is {shown}, not a whole number above 0: "
                f"counting against Hermes's default {default:,}",
            )
        return CharLimit(number)

    def char_limits(self) -> dict[str, int]:
        """USER.md and MEMORY.md limits from config.yaml, Hermes's defaults otherwise."""
        return {f.name: self.char_limit(f.name).chars for f in MEMORY_FILES}


def resolve_home(explicit: str | os.PathLike[str] | None = None) -> HermesHome:
    """``--home``, else ``$HERMES_HOME``, else ``~/.hermes``."""
    if explicit:
        return HermesHome(Path(explicit).expanduser())
    env = os.environ.get("HERMES_HOME")
    if env:
        return HermesHome(Path(env).expanduser())
    return HermesHome(Path.home() / ".hermes")


def _positive_int(value: object) -> int | None:
    """A YAML value as a limit: an int above 0, or digits in a string (one rule: params)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 < value <= MAX_CHAR_LIMIT else None
    if isinstance(value, str):
        try:
            return whole_number(value, "limit", 1, MAX_CHAR_LIMIT)
        except ValidationError:
            return None
    return None
