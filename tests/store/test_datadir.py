"""Recall's own data lives in the user's data directory, one folder per home, never in it."""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from dashboard.errors import NotWritableError
from dashboard.hermes.home import HermesHome
from dashboard.store.datadir import data_dir_for, folder_fault, recall_data_dir, user_data_root
from dashboard.store.recalldb import RecallData
from dashboard.web.security import load_secret_key
from tests.support import hermes_shapes as shapes


@pytest.fixture
def xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "xdg-data"
    monkeypatch.setenv("XDG_DATA_HOME", str(root))
    return root


def _legacy(home: HermesHome) -> tuple[bytes, int]:
    """What an older Recall left in ``<home>/recall/``: a key and a recall.db mid-WAL."""
    folder = home.root / "recall"
    key = load_secret_key(folder)
    data = RecallData(folder / "recall.db")
    revision = data.add_revision(str(home.root), "USER.md", "Name: Ada", note="old save")
    data.close()
    with closing(sqlite3.connect(folder / "recall.db")) as conn:  # a frame left in the WAL
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA wal_autocheckpoint=0")
        conn.execute("UPDATE memory_revisions SET note='kept in the WAL'")
        conn.commit()
    return key, revision


def _revision_note(folder: Path, revision: int) -> str:
    data = RecallData(folder / "recall.db")
    try:
        return data.revision(revision)["note"]
    finally:
        data.close()


def test_the_data_dir_follows_xdg_and_is_one_per_home(xdg: Path, tmp_path: Path) -> None:
    one, two = HermesHome(tmp_path / ".hermes"), HermesHome(tmp_path / "other" / ".hermes")
    assert user_data_root() == xdg / "recall"
    assert data_dir_for(one).parent == xdg / "recall" / "homes"
    assert data_dir_for(one) != data_dir_for(two)  # same folder name, another home
    assert data_dir_for(one) == data_dir_for(HermesHome(tmp_path / "x" / ".." / ".hermes"))
    assert data_dir_for(one).name.startswith("hermes-")
    assert not str(data_dir_for(one)).startswith(str(one.root))


def test_without_xdg_data_home_it_is_under_local_share(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    assert user_data_root() == tmp_path / "me" / ".local" / "share" / "recall"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/path")  # not absolute: the spec says ignore
    assert user_data_root() == tmp_path / "me" / ".local" / "share" / "recall"


def test_an_old_home_recall_folder_is_moved_once_with_everything_in_it(
    xdg: Path, tmp_path: Path
) -> None:
    home = HermesHome(tmp_path / "hermes")
    key, revision = _legacy(home)
    folder, note = recall_data_dir(home)
    assert folder == data_dir_for(home) and note and "moved" in note
    assert not (home.root / "recall").exists()
    assert (folder / "secret_key").read_bytes() == key
    assert _revision_note(folder, revision) == "kept in the WAL"
    assert recall_data_dir(home) == (folder, None)  # once: nothing left to move


def test_across_filesystems_the_move_copies_through_sqlite_then_removes_the_old_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shm = Path("/dev/shm") / f"recall-test-{os.getpid()}-{tmp_path.name}"
    monkeypatch.setenv("XDG_DATA_HOME", str(shm))
    home = HermesHome(tmp_path / "hermes")
    key, revision = _legacy(home)
    try:
        shm.mkdir()
        assert os.stat(shm).st_dev != os.stat(tmp_path).st_dev  # a real cross-device move
        folder, note = recall_data_dir(home)
        assert note and "moved" in note and not (home.root / "recall").exists()
        assert (folder / "secret_key").read_bytes() == key
        assert oct((folder / "secret_key").stat().st_mode & 0o777) == oct(0o600)
        assert _revision_note(folder, revision) == "kept in the WAL"
        assert not list(folder.parent.glob("*.incoming-*"))
    finally:
        shutil.rmtree(shm, ignore_errors=True)


@pytest.fixture
def home_with_legacy(xdg: Path, tmp_path: Path) -> Iterator[HermesHome]:
    home = HermesHome(tmp_path / "hermes")
    _legacy(home)
    yield home


def test_a_folder_holding_files_recall_did_not_write_is_left_alone(
    home_with_legacy: HermesHome,
) -> None:
    stranger = home_with_legacy.root / "recall" / "notes.txt"
    stranger.write_text("the user's own file")
    folder, note = recall_data_dir(home_with_legacy)
    assert folder == data_dir_for(home_with_legacy)
    assert note and "left" in note and "notes.txt" in note
    assert stranger.read_text() == "the user's own file"
    assert (home_with_legacy.root / "recall" / "recall.db").exists()


def test_data_already_in_the_data_dir_is_never_overwritten(home_with_legacy: HermesHome) -> None:
    target = data_dir_for(home_with_legacy)
    target.mkdir(parents=True)
    (target / "secret_key").write_bytes(b"k" * 32)
    folder, note = recall_data_dir(home_with_legacy)
    assert folder == target and (target / "secret_key").read_bytes() == b"k" * 32
    assert note and "already" in note
    assert (home_with_legacy.root / "recall" / "secret_key").exists()


def test_an_explicit_data_dir_is_used_as_given(
    home_with_legacy: HermesHome, tmp_path: Path
) -> None:
    assert recall_data_dir(home_with_legacy, tmp_path / "mine") == (tmp_path / "mine", None)
    assert (home_with_legacy.root / "recall").exists()


def test_an_app_without_a_data_dir_writes_nothing_into_the_home(xdg: Path, tmp_path: Path) -> None:
    from dashboard.app import create_app
    from tests.support import hermes_shapes as shapes

    home = tmp_path / "home"
    shapes.build_current_views(home / "state.db")
    app = create_app({"HERMES_HOME": str(home), "TESTING": True})
    assert app.test_client().get("/memory").status_code == 200
    assert not (home / "recall").exists()
    assert Path(app.config["DATA_DIR"]) == data_dir_for(HermesHome(home))
    assert (Path(app.config["DATA_DIR"]) / "secret_key").exists()


def test_folder_fault_names_a_folder_gone_read_only_or_fine(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    gone = folder_fault(folder)
    assert gone is not None and gone.kind == "missing" and gone.reason == "folder-missing"
    folder.mkdir()
    archive = folder / "archive.db"
    archive.write_bytes(b"")
    assert folder_fault(folder, [archive]) is None
    with shapes.read_only(folder, archive):  # root is refused too (immutable)
        fault = folder_fault(folder, [archive])
    assert fault is not None and fault.kind == "readonly"
    assert fault.sentence.startswith(f"Recall's data folder {folder} is read-only")
    assert "--data-dir" in fault.sentence and "state.db" not in fault.sentence
    error = fault.error()
    assert (error.reason, error.path) == ("folder-readonly", str(folder))


def test_recall_db_in_a_read_only_folder_is_not_writable_naming_the_folder(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    with shapes.read_only(folder), pytest.raises(NotWritableError) as info:
        RecallData(folder / "recall.db")
    assert info.value.folder == str(folder) and "read-only" in str(info.value)
    data = RecallData(folder / "recall.db")
    try:
        files = [folder, *(p for p in folder.iterdir() if not p.name.endswith("-shm"))]
        with shapes.read_only(*files), pytest.raises(NotWritableError) as info:
            data.add_revision("home", "USER.md", "Name: Ada")
        assert "Nothing was saved" in str(info.value)
        assert data.revisions("home", "USER.md") == []
    finally:
        data.close()
