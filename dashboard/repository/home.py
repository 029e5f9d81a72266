"""Where a Hermes home keeps things, and how Recall finds it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import yaml

DEFAULT_USER_CHAR_LIMIT = 1375
DEFAULT_MEMORY_CHAR_LIMIT = 2200


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
        return self.memories / "USER.md"

    @property
    def memory_md(self) -> Path:
        return self.memories / "MEMORY.md"

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
        try:
            data = yaml.safe_load(self.config_yaml.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError, UnicodeDecodeError):
            return {}
        return data if isinstance(data, dict) else {}

    def char_limits(self) -> dict[str, int]:
        """USER.md and MEMORY.md limits from config.yaml, Hermes's defaults otherwise."""
        memory = self.config().get("memory")
        memory = memory if isinstance(memory, dict) else {}
        return {
            "USER.md": _positive_int(memory.get("user_char_limit"), DEFAULT_USER_CHAR_LIMIT),
            "MEMORY.md": _positive_int(memory.get("memory_char_limit"), DEFAULT_MEMORY_CHAR_LIMIT),
        }


def resolve_home(explicit: str | os.PathLike[str] | None = None) -> HermesHome:
    """``--home``, else ``$HERMES_HOME``, else ``~/.hermes``."""
    if explicit:
        return HermesHome(Path(explicit).expanduser())
    env = os.environ.get("HERMES_HOME")
    if env:
        return HermesHome(Path(env).expanduser())
    return HermesHome(Path.home() / ".hermes")


def _positive_int(value: object, default: int) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int) and value > 0:
        return value
    if isinstance(value, str) and value.strip().isdigit() and int(value) > 0:
        return int(value)
    return default
