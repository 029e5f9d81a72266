"""Read a Hermes home the way every page does: through Recall's archive of it.

Pages never read a Hermes ``state.db`` directly (store/state.py); a test that builds a
home of some shape (hermes_shapes.py) imports it first, exactly as ``recall serve``'s
syncer would, and reads the archive.
"""

from __future__ import annotations

from pathlib import Path

from dashboard.archive.files import open_archive
from dashboard.archive.importer import sync
from dashboard.hermes.home import HermesHome
from dashboard.reader.reader import StateReader
from tests.support import hermes_shapes as hs
from tests.support import hermes_v31 as hv

#: Homes whose archives hold every kind of row the visible-row rule reads: v31's
#: re-inserted copies and superseded originals, rewound and in-place compacted rows
#: (epochs), today's views form with hidden rows (current); profiles: three of them.
SHAPES = ("v31", "epochs", "current", "profiles")


def archive_home(home: str | Path, archive: str | Path | None = None) -> Path:
    """Import (or sync) ``home`` into ``archive`` (default: ``archive.db`` beside the
    home's folder); returns the archive's path."""
    home = Path(home)
    path = Path(archive) if archive is not None else home.parent / f"{home.name}-archive.db"
    with open_archive(path, to_sync=True) as store:
        sync(store, HermesHome(home).state_db, home)
    return path


def archived_reader(home: str | Path, archive: str | Path | None = None) -> StateReader:
    """A reader of ``home``'s archive, brought level with the home first."""
    return StateReader(HermesHome(Path(home)), path=archive_home(home, archive))


def build_shape(home: Path, shape: str) -> None:
    """Write a Hermes home of ``shape`` (:data:`SHAPES`) at ``home``."""
    if shape == "v31":
        hv.build_v31_home(home)
    elif shape == "epochs":
        hs.build_epochs_home(home)
    elif shape == "current":
        hs.build_current_views(home / "state.db")
    elif shape == "profiles":
        hs.build_profiles_home(home)
    else:
        raise ValueError(shape)


def profiles_reader(root: Path) -> tuple[hs.ProfilesFacts, StateReader]:
    """A home of three profiles (hermes_shapes.build_profiles_home) under ``root``, read
    as ``recall serve`` reads it: every profile synced into one archive (inline)."""
    from dashboard.reader.opening import reading_for

    facts = hs.build_profiles_home(root / "hermes")
    data = root / "data"
    reading = reading_for(HermesHome(facts.root), data / "archive.db", inline=True, folder=data)
    return facts, reading.reader
