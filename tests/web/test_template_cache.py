"""Compiled templates kept in Recall's data folder (web/template_cache.py): a restarted
app renders from them without compiling; a folder that refuses them never fails a page."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import jinja2
import pytest

from tests.support import hermes_shapes as shapes
from tests.support.app import make_app


def compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the templates Jinja compiles from source from now on."""
    names: list[str] = []
    real = jinja2.Environment.compile

    def spy(self: jinja2.Environment, source: Any, name: Any = None, *args: Any, **kw: Any) -> Any:
        names.append(str(name))
        return real(self, source, name, *args, **kw)

    monkeypatch.setattr(jinja2.Environment, "compile", spy)
    return names


def test_a_restarted_app_renders_from_the_compiled_templates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = shapes.build_current_views(tmp_path / "home" / "state.db").parent
    cache = tmp_path / "compiled"
    cache.mkdir()
    names = compiles(monkeypatch)
    first = make_app(home, tmp_path / "data", TEMPLATE_CACHE=str(cache))
    assert first.test_client().get("/overview").status_code == 200
    assert "overview.html" in names and any(cache.iterdir())
    names.clear()
    again = make_app(home, tmp_path / "data", TEMPLATE_CACHE=str(cache))  # a restart
    page = again.test_client().get("/overview")
    assert page.status_code == 200 and names == []
    assert "Detected layout" in page.get_data(as_text=True)


@pytest.mark.parametrize("fault", ["gone after start", "never made", "a file"])
def test_a_cache_folder_that_refuses_compiled_templates_never_fails_a_page(
    tmp_path: Path, fault: str
) -> None:
    home = shapes.build_current_views(tmp_path / "home" / "state.db").parent
    cache = tmp_path / "compiled"
    if fault == "a file":
        cache.write_text("someone else's file")
    elif fault == "gone after start":
        cache.mkdir()
    app = make_app(home, tmp_path / "data", TEMPLATE_CACHE=str(cache))
    if fault == "gone after start":
        shutil.rmtree(cache)
    assert app.test_client().get("/overview").status_code == 200
    assert app.test_client().get("/memory").status_code == 200
