"""Finding a Hermes installation, probing it, and reading its replies."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dashboard.hermes import installation
from dashboard.hermes.installation import ENV_PYTHON, candidates, find, read_answer, root_of
from tests.support.real_hermes import PINNED, hermes_python, install_into


@pytest.fixture(autouse=True)
def _fresh_probes():
    installation.forget()
    yield
    installation.forget()


def test_a_profile_belongs_to_the_home_it_sits_in(tmp_path: Path) -> None:
    assert root_of(tmp_path / "profiles" / "work") == tmp_path
    assert root_of(tmp_path) == tmp_path
    assert root_of(tmp_path / "elsewhere" / "work") == tmp_path / "elsewhere" / "work"


def test_where_recall_looks_first_found_first(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert candidates(home, {"PATH": ""}) == []
    python = install_into(home)
    assert [p for p, _ in candidates(home / "profiles" / "work", {"PATH": ""})] == [python]
    # `hermes` on PATH: the Python its first line names, after the installer's layout
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "hermes"
    script.write_text(f"#!{hermes_python()}\nimport sys\n")
    script.chmod(0o755)
    found = candidates(home, {"PATH": str(bin_dir)})
    assert [p for p, _ in found] == [python, hermes_python()]
    assert "on PATH" in found[1][1]
    # a script run by `env python3` names no Python of Hermes's own
    script.write_text("#!/usr/bin/env python3\n")
    assert len(candidates(home, {"PATH": str(bin_dir)})) == 1
    # the variable wins over both, and "off" turns looking off
    assert candidates(home, {ENV_PYTHON: "/x/python", "PATH": str(bin_dir)}) == [
        (Path("/x/python"), f"{ENV_PYTHON}=/x/python")
    ]
    assert candidates(home, {ENV_PYTHON: "off", "PATH": str(bin_dir)}) == []


def test_the_real_hermes_is_found_with_its_version(tmp_path: Path) -> None:
    home = tmp_path / "home"
    install_into(home)
    found = find(home, {"PATH": ""})
    assert found.installation is not None
    assert found.installation.version == PINNED
    assert found.installation.label == f"Hermes {PINNED}"
    assert found.problem is None
    # the probe ran with an empty HERMES_HOME of its own: this home gained nothing
    assert sorted(p.name for p in home.iterdir()) == ["hermes-agent"]


def test_a_python_without_hermes_is_not_an_installation_and_says_why(tmp_path: Path) -> None:
    found = find(tmp_path, {ENV_PYTHON: sys.executable, "PATH": ""})
    assert found.installation is None
    assert found.problem is not None
    assert "cannot run Hermes's approval code" in found.problem
    assert "ModuleNotFoundError" in found.problem
    missing = find(tmp_path, {ENV_PYTHON: str(tmp_path / "no-python"), "PATH": ""})
    assert missing.installation is None
    assert "could not be started" in (missing.problem or "")


def test_a_probe_is_kept_until_hermes_changes(tmp_path: Path, monkeypatch) -> None:
    home = tmp_path / "home"
    install_into(home)
    first = find(home, {"PATH": ""}).installation
    assert first is not None
    runs = []
    real_run = installation._run
    monkeypatch.setattr(installation, "_run", lambda *a: runs.append(a) or real_run(*a))
    assert find(home, {"PATH": ""}).installation == first
    assert runs == []  # kept: no Python started
    installation.forget()
    assert find(home, {"PATH": ""}).installation == first
    assert len(runs) == 1


@pytest.mark.parametrize(
    ("text", "verb", "done", "missing", "reason", "notes"),
    [
        ("Approved 1 memory write(s).", "approve", True, False, None, ()),
        (
            "Approved 0 memory write(s).\nFailed:\n  ab12: Replacement would put memory at "
            "1,400/1,375 chars.",
            "approve",
            False,
            False,
            "Replacement would put memory at 1,400/1,375 chars.",
            (),
        ),
        (  # a newer Hermes: applied, its cleanup left for later
            "Approved 1 memory write(s).\nFailed:\n  ab12: applied; cleanup is pending and "
            "will not be replayed",
            "approve",
            True,
            False,
            None,
            ("applied; cleanup is pending and will not be replayed",),
        ),
        ("No pending memory write with id 'ab12'.", "approve", False, True, None, ()),
        ("No pending memory writes.", "approve", False, True, None, ()),
        ("Rejected pending memory write 'ab12'.", "reject", True, False, None, ()),
        (
            "Rejected pending memory write 'ab12', but cleanup is pending and requires "
            "manual recovery.",
            "reject",
            True,
            False,
            None,
            ("but cleanup is pending and requires manual recovery.",),
        ),
        ("No pending memory write with id 'ab12'.", "reject", False, True, None, ()),
        ("Something else entirely", "approve", False, False, "Hermes answered: Something", ()),
        ("", "reject", False, False, "Hermes answered: ", ()),
    ],
)
def test_hermess_replies_are_read_never_guessed(
    text: str, verb: str, done: bool, missing: bool, reason: str | None, notes: tuple
) -> None:
    answer = read_answer(text, verb, "ab12")
    assert (answer.done, answer.missing) == (done, missing)
    if reason is None:
        assert answer.reason is None
    else:
        assert (answer.reason or "").startswith(reason)
    assert answer.notes == notes


def test_another_records_failure_is_not_this_ones() -> None:
    text = "Approved 1 memory write(s).\nFailed:\n  zz99: old_text not found"
    answer = read_answer(text, "approve", "ab12")
    assert answer.done and answer.notes == ()
