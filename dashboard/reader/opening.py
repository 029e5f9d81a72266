"""What a home reads: its own Recall store, or its archive kept in step by a syncer.

The one rule every page, API, CLI command and embedded agent goes through
(:func:`reading_for`): it decides the file (:func:`archive.files.read_choice`),
builds the reader over it and, when there is an archive to fill, the syncer.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from dashboard.archive.files import ReadChoice, foreign_file, migrate_own_store, read_choice
from dashboard.archive.importer import Progress
from dashboard.archive.syncer import Syncer, SyncGroup
from dashboard.errors import StoreUnavailableError, ValidationError
from dashboard.hermes.home import HermesHome
from dashboard.hermes.profiles import Scope, discover
from dashboard.lineage.epochs import counts_missing, keep_in_place_counts
from dashboard.reader.reader import StateReader
from dashboard.store.readonly import open_own_readonly
from dashboard.store.session_store import SessionStore


@dataclass(frozen=True)
class HomeReading:
    """A home's reader, and the syncer filling what it reads (None: its own store)."""

    choice: ReadChoice
    reader: StateReader
    syncer: Syncer | SyncGroup | None

    @property
    def refused_archive(self) -> Path | None:
        """The archive named, when it is someone else's database (never synced into)."""
        return self.choice.archive if self.syncer is None else None


def reading_for(
    home: HermesHome,
    archive: str | os.PathLike[str] | None = None,
    *,
    inline: bool = False,
    folder: str | os.PathLike[str] | None = None,
    will_create: bool = False,
    on_progress: Callable[[Progress], None] | None = None,
    homes: Sequence[HermesHome] = (),
    only: str | None = None,
) -> HomeReading:
    """The reader every page, API and CLI command uses for ``home`` (:func:`read_choice`).

    ``home``'s profiles and those of ``homes`` (more ``--home`` folders) share the
    one archive of ``home`` (profiles.py); ``only`` (``--profile``) serves one of
    them: only its source is synced, and the reader's scope is that profile for
    good. With an archive to fill, the syncer is made here and hooked into the
    reader; the caller starts its thread (``recall serve``) or leaves it ``inline``.
    """
    profiles = discover([home, *homes])
    if only is not None:
        served = [p for p in profiles if p.name == only]
        if not served:
            raise ValidationError(
                f"There is no profile called {only!r}; the profiles are: "
                f"{', '.join(p.name for p in profiles)}."
            )
    else:
        served = profiles
    scope = Scope.of([only]) if only is not None else Scope()
    # A home that is Recall's own store is read as it is only when it is all there is.
    alone = len(profiles) == 1
    choice = read_choice(home, archive, folder=folder, will_create=will_create, own=alone)
    if choice.archive is None:
        migrate_own_store(choice.path)
        _keep_own_counts(choice.path)
        return HomeReading(choice, StateReader(home, choice.path, profiles=profiles), None)
    if foreign_file(choice.archive):
        # Someone else's database named as the archive: never synced into; reading it
        # says what it is (StoreUnavailableError "not-archive", with its path).
        reader = StateReader(served[0].home, choice.path, scope=scope, profiles=profiles)
        return HomeReading(choice, reader, None)
    members = [
        Syncer(
            choice.archive,
            p.state_db,
            p.home.root,
            inline=inline,
            on_progress=on_progress,
            profile=p.name,
            id_prefix=p.id_prefix,
            upkeep=keep_in_place_counts,
        )
        for p in served
    ]
    syncer: Syncer | SyncGroup = members[0] if len(members) == 1 else SyncGroup(members)
    reader = StateReader(
        served[0].home, choice.path, syncer.before_read, scope=scope, profiles=profiles
    )
    return HomeReading(choice, reader, syncer)


def _keep_own_counts(path: Path) -> None:
    """Keep the in-place counts of a home's own Recall store (no syncer keeps them;
    epochs.keep_in_place_counts), when some are missing: after a migration or a build,
    once; after an agent's compactions, those sessions. A file that cannot be read or
    written is left alone: the pages derive what is missing, or say why they cannot."""
    try:
        with closing(open_own_readonly(path)) as conn:
            if not counts_missing(conn):
                return
        with SessionStore(path) as store:
            keep_in_place_counts(store)
    except (sqlite3.Error, OSError, StoreUnavailableError, RuntimeError):
        # RuntimeError: a file written by a newer Recall (schema.migrate refuses it).
        return
