"""The app under test, over a home and a data directory."""

from __future__ import annotations

from pathlib import Path

from flask import Flask

from dashboard.app import create_app


def make_app(home: Path, data_dir: Path, **extra: object) -> Flask:
    return create_app(
        {"HERMES_HOME": str(home), "DATA_DIR": str(data_dir), "TESTING": True, **extra}
    )
