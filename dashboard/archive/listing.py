"""Sessions in the archive: the paged list by presence, and deleting one.

Deleting is the only way anything leaves the archive, and it is allowed only for a
session Hermes no longer has (store/presence.py's rule): a session still in Hermes would be
copied back by the next sync, so deleting it here would undo itself. The delete
runs through the write core (``BEGIN IMMEDIATE`` with retry) in one transaction:
the session, its messages (the FTS triggers remove them from both indexes) and its
usage rows; sessions that continued it keep their own rows and lose the link.
The list reads the archive read-only and never creates it.

Every profile shares the one archive (profiles.py): the list, the preview and the
delete read it in a request's scope (``reader.apply_scope``), so one profile's page
neither lists nor deletes another's sessions; reading every profile, the page shows
each profile's prune radar in turn (each has its own source, config and sweeps).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dashboard.archive.prune_radar import Candidate, ContinuationRule, PruneRadar, prune_radar
from dashboard.errors import ConflictError, NotFoundError, StoreUnavailableError
from dashboard.hermes.home import HermesHome
from dashboard.hermes.profiles import EVERY_PROFILE, Profile, Scope
from dashboard.store.fts_upkeep import triggers_off
from dashboard.store.names import names_of, session_names
from dashboard.store.presence import gone_sql, presence_sql
from dashboard.store.readonly import open_own_readonly, read_snapshot
from dashboard.store.scope import apply_scope
from dashboard.store.session_store import SessionStore

PAGE_SIZE = 50


@dataclass(frozen=True)
class ArchivedSession:
    """One session as the archive holds it."""

    session_id: str
    title: str | None
    source: str | None
    started_at: float | None
    ended_at: float | None
    messages: int  # rows in the archive
    gone_at: float | None  # when it left Hermes (store/presence.py), else None
    profile: str | None = None  # the profile it belongs to
    name: str = ""  # what a person calls it (store/names.py)

    @property
    def label(self) -> str:
        return self.name or self.title or self.session_id


@dataclass(frozen=True)
class ArchiveListing:
    """One page of the archive's sessions that ``presence`` keeps, newest first."""

    presence: str
    page: int
    page_size: int
    total: int
    sessions: tuple[ArchivedSession, ...]
    exists: bool = True  # False: there is no archive yet
    problem: str | None = None  # why the archive could not be read

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.page_size))


@dataclass(frozen=True)
class ProfileRadar:
    """One profile's prune radar (``profile`` None: the one home shown)."""

    profile: str | None
    radar: PruneRadar


@dataclass(frozen=True)
class ArchivePage:
    """What ``/archive`` shows: the prune radar (one per profile, reading every profile)
    and the archive's sessions."""

    archive: str
    radars: tuple[ProfileRadar, ...]
    listing: ArchiveListing
    # The name of each radar candidate the archive holds (its archive id -> its name there,
    # store/names.py), read with the listing; empty when the archive could not be read.
    names: Mapping[str, str] = field(default_factory=dict)

    @property
    def radar(self) -> PruneRadar:
        """The first (with one profile, the only) radar."""
        return self.radars[0].radar

    def name_of(self, candidate: Candidate) -> str:
        """What a radar row calls its session: the archive's name for it when archived,
        else its title in Hermes, else its id."""
        if candidate.archive_id is not None and candidate.archive_id in self.names:
            return self.names[candidate.archive_id]
        return candidate.title or candidate.archive_id or candidate.session_id


@dataclass(frozen=True)
class DeletionPreview:
    """What deleting a session removes, shown before a person confirms."""

    session_id: str
    title: str | None
    started_at: float | None
    messages: int
    usage_rows: int
    gone_at: float | None
    name: str = ""  # what a person calls it (store/names.py)

    @property
    def label(self) -> str:
        return self.name or self.title or self.session_id

    @property
    def deletable(self) -> bool:
        return self.gone_at is not None

    @property
    def refusal(self) -> str | None:
        """Why this session cannot be deleted (None when it can)."""
        return None if self.deletable else STILL_IN_HERMES.format(sid=self.session_id)


@dataclass(frozen=True)
class DeletionReport:
    """What a delete removed."""

    session_id: str
    title: str | None
    messages: int
    usage_rows: int


STILL_IN_HERMES = (
    "Session {sid!r} is still in Hermes, so it cannot be deleted from Recall's archive: "
    "the next sync would copy it back. Delete it in Hermes (or let its prune take it); "
    "once it is gone from Hermes it can be deleted here."
)


IMPORTING = (
    "The archive is being imported (`recall archive sync` is still building its search index), "
    "so nothing can be deleted from it yet: try again when the import has finished."
)


def archive_page(
    home: HermesHome,
    archive: Path,
    presence: str,
    page: int,
    now: float | None = None,
    *,
    continues: ContinuationRule,
    profiles: Sequence[Profile] = (),
    scope: Scope = EVERY_PROFILE,
    conn: sqlite3.Connection | None = None,
) -> ArchivePage:
    """The prune radar of ``home`` against ``archive``, and one page of the archive's
    sessions in ``scope``. ``continues``: the continuation rule the radar groups
    lineages by (``lineage.links.continues``). ``profiles`` (2+, reading every
    profile): each one's radar, from its own source and config, in place of ``home``'s.
    ``conn``: the archive already open in ``scope`` (one read transaction for the
    listing and every radar's check), else each opens it."""
    if scope.spans(profiles):
        radars = tuple(
            ProfileRadar(p.name, prune_radar(p.home, archive, now, continues=continues, conn=conn))
            for p in profiles
        )
    else:
        radar = prune_radar(home, archive, now, continues=continues, conn=conn)
        radars = (ProfileRadar(None, radar),)
    if conn is None:
        return ArchivePage(
            str(archive), radars, list_archived(archive, presence, page, scope=scope)
        )
    archived = [c.archive_id for r in radars for c in r.radar.candidates if c.archive_id]
    listing = _listing(conn, presence, page, PAGE_SIZE)
    return ArchivePage(str(archive), radars, listing, names_of(conn, archived))


def _open(archive: Path, scope: Scope) -> sqlite3.Connection:
    """The archive read-only, seeing ``scope``'s profiles only."""
    conn = open_own_readonly(archive)
    try:
        apply_scope(conn, scope)
    except sqlite3.Error:
        conn.close()
        raise
    return conn


def list_archived(
    archive: Path,
    presence: str,
    page: int,
    page_size: int = PAGE_SIZE,
    *,
    scope: Scope = EVERY_PROFILE,
) -> ArchiveListing:
    """Page ``page`` of the archive's sessions ``presence`` keeps (store/presence.py) in ``scope``,
    newest first."""
    if not archive.is_file():
        return ArchiveListing(presence, page, page_size, 0, (), exists=False)
    try:
        conn = _open(archive, scope)
    except StoreUnavailableError as exc:
        return ArchiveListing(presence, page, page_size, 0, (), problem=exc.reason)
    try:
        with read_snapshot(conn):
            return _listing(conn, presence, page, page_size)
    except sqlite3.DatabaseError as exc:
        return ArchiveListing(presence, page, page_size, 0, (), problem=str(exc)[:200])
    finally:
        conn.close()


def _listing(conn: sqlite3.Connection, presence: str, page: int, page_size: int) -> ArchiveListing:
    where = presence_sql(presence, "s")
    total = conn.execute(f"SELECT count(*) FROM sessions s WHERE {where}").fetchone()[0]
    rows = conn.execute(
        f"SELECT s.id, s.title, s.source, s.started_at, s.ended_at, "
        f"(SELECT count(*) FROM messages m WHERE m.session_id = s.id), "
        f"{gone_sql('s')}, s.profile "
        f"FROM sessions s WHERE {where} ORDER BY s.started_at DESC, s.id DESC "
        "LIMIT ? OFFSET ?",
        (page_size, (page - 1) * page_size),
    ).fetchall()
    names = session_names(conn, {r[0]: r[1] for r in rows})
    return ArchiveListing(
        presence,
        page,
        page_size,
        total,
        tuple(ArchivedSession(*r, name=names[r[0]]) for r in rows),
    )


def deletion_preview(
    archive: Path, session_id: str, scope: Scope = EVERY_PROFILE
) -> DeletionPreview:
    """The session, its message and usage-row counts; NotFoundError if the archive lacks
    it (or ``scope`` does not hold it)."""
    if not archive.is_file():
        raise NotFoundError(f"there is no archive at {archive}")
    conn = _open(archive, scope)
    try:
        with read_snapshot(conn):
            return _preview(conn, archive, session_id)
    finally:
        conn.close()


def delete_from_archive(
    archive: Path, session_id: str, scope: Scope = EVERY_PROFILE
) -> DeletionReport:
    """Delete a session gone from Hermes, with its messages and usage rows, in one transaction.

    NotFoundError for an unknown id (or no archive, or a session ``scope`` does not
    hold); ConflictError for a session Hermes still has. The source is never opened.
    """
    if not archive.is_file():
        raise NotFoundError(f"there is no archive at {archive}")
    if not scope.everything:
        # The write connection cannot be scoped (its temporary views would stand in for
        # the tables it deletes from): the scope is checked first; ids never change profile.
        deletion_preview(archive, session_id, scope)
    # Checked before the store opens: opening a stale store rebuilds its index, which
    # must not happen under a first import still landing rows with the triggers off.
    if _importing(archive):
        raise ConflictError(IMPORTING)
    with SessionStore(archive) as store:

        def delete(conn: sqlite3.Connection) -> DeletionReport:
            found = _preview(conn, archive, session_id)
            if found.refusal:
                raise ConflictError(found.refusal)
            # Joins this transaction: the check and the delete see one state.
            removed = store.delete_session(session_id)
            return DeletionReport(session_id, found.title, removed, found.usage_rows)

        return store.core.write(delete)


def _importing(archive: Path) -> bool:
    """Whether a first import is under way (its FTS triggers are off)."""
    conn = open_own_readonly(archive)
    try:
        return triggers_off(conn)
    finally:
        conn.close()


def _preview(conn: sqlite3.Connection, archive: Path, session_id: str) -> DeletionPreview:
    gone = gone_sql("s")
    row = conn.execute(
        f"SELECT s.id, s.title, s.started_at, "
        "(SELECT count(*) FROM messages m WHERE m.session_id = s.id), "
        "(SELECT count(*) FROM session_model_usage u WHERE u.session_id = s.id), "
        f"{gone} FROM sessions s WHERE s.id = ?",
        (session_id,),
    ).fetchone()
    if row is None:
        raise NotFoundError(f"session {session_id!r} is not in the archive")
    return DeletionPreview(*row, name=session_names(conn, {row[0]: row[1]})[row[0]])
