"""Read-only access to the state.db a dashboard shows (a user's home or a demo)."""

from __future__ import annotations

import copy
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path
from typing import Any

from dashboard.archive.listing import ArchivePage, archive_page
from dashboard.costs.rollup import CostRollup
from dashboard.errors import NotFoundError, StoreUnavailableError, ValidationError
from dashboard.hermes.home import HermesHome
from dashboard.hermes.profiles import Profile, Scope, by_name
from dashboard.lineage import links
from dashboard.lineage.chains import Chain, load_chain
from dashboard.lineage.epochs import EpochsCache, in_place_counts
from dashboard.lineage.graph import LineageCache, archive_version
from dashboard.lineage.index import INDEX_LIMIT, ChainIndex, chain_index
from dashboard.meaning.reader import MeaningReader
from dashboard.reader.activity import recent_activity
from dashboard.reader.costs_reading import CostsReading
from dashboard.reader.memory_reading import MemoryReading
from dashboard.reader.overview import (
    SourceFigures,
    archive_counts,
    archive_figures,
    archive_overview,
)
from dashboard.reader.provenance import archive_memory_calls
from dashboard.reader.screens import (
    ChainPage,
    OverviewPage,
    SearchPage,
    SessionPage,
    StitchedScreen,
)
from dashboard.reader.spending import SpendCache
from dashboard.reader.staleness import StalenessCache
from dashboard.search.cards import fold_copies
from dashboard.search.facets import session_facets
from dashboard.search.query import highlight_terms, parse_query, usable_query
from dashboard.search.row_map import RowMapCache
from dashboard.search.said import said_only
from dashboard.search.sessions import (
    SearchRequest,
    SearchResult,
    SessionResult,
    search_sessions,
    session_matches,
)
from dashboard.search.similar import SimilarSession, similar_sessions
from dashboard.sessions.stitched import StitchedPart, load_stitched, load_stitched_page
from dashboard.sessions.transcript import (
    PAGE_SIZE,
    Transcript,
    TranscriptRequest,
    last_message_id,
    load_transcript,
    match_entries,
)
from dashboard.store.kept import KeptConnections
from dashboard.store.readonly import classify, open_own_readonly, read_snapshot
from dashboard.store.recalldb import RecallData
from dashboard.store.scope import apply_scope, follow_scope
from dashboard.store.state import StoreState, read_state


@dataclass
class Snapshot:
    """One read connection to the archive, and its state (store/state.py)."""

    conn: sqlite3.Connection
    state: StoreState
    _version: tuple[object, ...] | None = None

    def version(self) -> tuple[object, ...]:
        """graph.archive_version of this snapshot, read once for every cache keyed on it."""
        if self._version is None:
            self._version = archive_version(self.conn, self.state)
        return self._version


class StateReader(MemoryReading, CostsReading):
    """Opens Recall's archive read-only for each unit of work.

    ``path`` is the file the pages read (Recall's archive of ``home``, or the home's
    own state.db when it is Recall's store: archive.read_choice); a file of any other
    shape is refused (StoreUnavailableError "not-archive"): reading Hermes's own
    layouts is the importer's job. ``home`` still names the memory files
    and config.yaml. ``before_read`` runs before each unit of work (the archive's
    syncer: sync first when inline, or say why an empty archive has nothing yet).
    """

    def __init__(
        self,
        home: HermesHome,
        path: Path | None = None,
        before_read: Callable[[], None] | None = None,
        *,
        scope: Scope | None = None,
        profiles: Sequence[Profile] = (),
        epochs: EpochsCache | None = None,
        meaning: MeaningReader | None = None,
    ) -> None:
        self.home = home
        self._path = Path(path) if path is not None else home.state_db
        self._before_read = before_read
        # What this reader may show (profiles.py): every profile, or some; and the
        # profiles Recall knows, for the switcher and the per-profile figures.
        self.scope = scope if scope is not None else Scope()
        self.profiles: tuple[Profile, ...] = tuple(profiles)
        self._scoped: dict[str, StateReader] = {}
        self._scoped_lock = threading.Lock()
        self._demo: bool | None = None
        # Per reader, so per scope: a scope's graph and in-place counts are its own.
        self._lineage = LineageCache()
        # A session's epochs are the same in every scope that may read it: one cache.
        self._epochs = epochs if epochs is not None else EpochsCache()
        self._in_place = LineageCache(lambda conn: in_place_counts(conn, self._epochs))
        # The meaning index's vectors in memory: the archive's, one for every scope.
        self.meaning = meaning if meaning is not None else MeaningReader()
        # Which session each message id is, for the ranked read (search/row_map.py):
        # per reader, as a scoped map holds its profiles' rows alone.
        self._row_maps = RowMapCache(scoped=not self.scope.everything)
        # Spend answers, and the costly sessions of a range (keys start "sessions").
        self._spend_cache = SpendCache()
        # Each Hermes file's overview figures, while its files are unchanged.
        self._sources = SourceFigures()
        # The overview's counts of the archive (two counts of every message, a seek per
        # session for the newest: ~70 ms at 1M messages), until the archive's next write.
        self._figures = LineageCache(self._count_figures)
        # The memory calls of this reader's scope (the memory page's provenance), parsed,
        # until the archive's next write.
        self._memory_calls = LineageCache(archive_memory_calls)
        self._staleness = StalenessCache()  # the memory page's newer conversations
        # A read-only connection per thread kept between snapshots (store/kept.py): its
        # page cache and FTS5's index structures outlive one request. Each is scoped once.
        self._kept = KeptConnections(self._path, self._prepare)

    @property
    def path(self) -> Path:
        return self._path

    def scoped(self, profile: str | None) -> StateReader:
        """The reader of one profile (``profile``) or of every profile this reader may
        show (None or ``all``), made once and kept: each has its own caches.

        A reader already restricted (``recall serve --profile``) answers itself for
        every choice: nothing widens its scope.
        """
        if not self.scope.spans(self.profiles) or profile in (None, "all"):
            return self
        with self._scoped_lock:
            found = self._scoped.get(profile)
            if found is None:
                home = by_name(self.profiles, profile).home
                found = StateReader(
                    home,
                    self._path,
                    self._before_read,
                    scope=Scope.of([profile]),
                    profiles=self.profiles,
                    epochs=self._epochs,
                    meaning=self.meaning,
                )
                found._demo = self._demo
                self._scoped[profile] = found
            return found

    def open_for_rollup(self) -> sqlite3.Connection:
        """A read-only connection to the whole archive (every profile, whatever this
        reader's scope) that the cost rollup is built and brought up to date from."""
        if self._before_read is not None:
            self._before_read()
        return self._open_whole()

    def _open_whole(self) -> sqlite3.Connection:
        """:meth:`open_for_rollup` without the sync before it (inside a snapshot, which
        ran it)."""
        conn = open_own_readonly(self.path)
        try:
            read_state(conn, self.path)  # the archive at the current schema, or why not
        except BaseException:
            conn.close()
            raise
        return conn

    @contextmanager
    def snapshot(self, *, sync: bool = True) -> Iterator[Snapshot]:
        """A read-only connection and the archive's state, every statement inside seeing
        one state of the file (a read transaction: a sync landing meanwhile is not seen);
        errors become StoreUnavailableError. ``sync=False``: without running
        ``before_read`` first (the archive page reads the archive as it is)."""
        if sync and self._before_read is not None:
            self._before_read()
        try:
            with self._kept.connection() as conn:
                state = read_state(conn, self.path)
                with read_snapshot(conn):
                    snap = Snapshot(conn, state)
                    # The scope's session ids as this snapshot sees the archive.
                    follow_scope(conn, self.scope, snap.version)
                    yield snap
        except sqlite3.DatabaseError as exc:
            # "database disk image is malformed" surfaces on the first page read.
            raise classify(exc, self.path) from exc

    def _prepare(self, conn: sqlite3.Connection) -> None:
        """A new connection's setup: the file proved an archive, then this reader's scope."""
        read_state(conn, self.path)
        apply_scope(conn, self.scope)

    def is_demo(self) -> bool:
        """Whether the home was built by ``recall demo``, without ever waiting on its lock.

        Every page shows the answer as a banner, and most pages (the memory editor,
        error pages) need no database. While Hermes holds an EXCLUSIVE lock on a
        DELETE-journal home a reader waits out the busy timeout, so this looks with
        none: until the file answers at once the answer is False, asked again next
        time; once known it is remembered (a home does not become a demo).
        """
        if self._demo is None:
            try:
                conn = open_own_readonly(self.path, timeout=0, io_retries=0)
            except StoreUnavailableError:
                return False
            try:
                self._demo = read_state(conn, self.path).is_demo
            except (sqlite3.Error, StoreUnavailableError):
                return False
            finally:
                conn.close()
        return self._demo

    def overview(self) -> dict[str, Any]:
        """What the store read holds: layout, counts, activity range, file sizes; reading
        an archive, also what it keeps (``archive``) and the source's state (``source``);
        reading every profile (:attr:`spans_profiles`), each one's figures and source
        (``profiles``: name -> figures, in the profiles' order)."""
        with self.snapshot() as snap:
            info = self._archive_figures(snap)
        return self._with_sources(info)

    def overview_page(
        self,
        *,
        today: date,
        timezone: str | None = None,
        rollup: CostRollup | None = None,
        shelf: RecallData | None = None,
    ) -> OverviewPage:
        """The overview screen: the last 30 days up to ``today`` (:func:`recent_activity`),
        then :meth:`overview`'s figures (each source's also kept in ``shelf``, Recall's
        own file, for the next start: :class:`SourceFigures`).

        In the one snapshot: the archive's figures, and the activity's sessions, models,
        tools, tokens and spend (the cost rollup's sums brought up to date from it, as
        :meth:`costs_report` says). Not in it: each source's own state, read from the
        Hermes files themselves (never waiting on their lock).
        """
        with self.snapshot() as snap:
            info = self._archive_figures(snap)
            activity, problem = None, None
            try:
                with self._spending(snap, rollup) as spending:
                    activity = recent_activity(
                        snap.conn, spending.spend, today=today, timezone=timezone
                    )
            except ValidationError as exc:  # a bad timezone: the diagnostics still help
                problem = str(exc)
        return OverviewPage(self._with_sources(info, shelf), activity, problem)

    def _archive_figures(self, snap: Snapshot) -> dict[str, Any]:
        figures = copy.deepcopy(self._figures.get(snap.conn, snap.state, snap.version()))
        kept = figures.pop("archive", None)
        info = archive_overview(snap.conn, self.path, figures=figures)
        info["is_demo"] = snap.state.is_demo
        meaning = self.meaning.status(snap.conn)  # as JSON too: `recall info --json`
        info["meaning"] = {**meaning.to_json(), "percent": meaning.percent, "model": meaning.model}
        if kept is not None:
            info["archive"] = kept
        return info

    def _count_figures(self, conn: sqlite3.Connection) -> dict[str, Any]:
        """The overview's counts in this reader's scope (and what the archive keeps)."""
        kept = archive_counts(conn) if self.reads_archive else None
        # One count of every message (the same connection, the same scope) for both.
        every = kept["messages"] if kept is not None else None
        figures = archive_figures(conn, by_profile=self.spans_profiles, every=every)
        if kept is not None:
            figures["archive"] = kept
        return figures

    def _with_sources(
        self, info: dict[str, Any], shelf: RecallData | None = None
    ) -> dict[str, Any]:
        """``info`` with the source's state (each profile's, reading every one) and paths."""
        if self.reads_archive:
            info["source"] = self._sources.get(self.home.state_db, shelf)
        if "profiles" in info:  # every profile: each one's figures and its own source
            found = info["profiles"]
            info["profiles"] = {
                p.name: {
                    **found.get(p.name, {"sessions": 0, "messages": 0}),
                    "source": self._sources.get(p.state_db, shelf),
                }
                for p in self.profiles
            }
        info["home"] = str(self.home.root)
        info["path"] = str(self.path)
        return info

    @property
    def reads_archive(self) -> bool:
        """Whether the store read is an archive of the home rather than its own state.db."""
        return Path(self.path).resolve() != Path(self.home.state_db).resolve()

    def transcript(
        self, session_id: str, include_inactive: bool = False, view: str = "everything"
    ) -> Transcript:
        """One session's messages as ``view`` shows them, with its chain neighbours."""
        with self.snapshot() as snap:
            found = load_transcript(
                snap.conn, session_id, include_inactive=include_inactive, view=view
            )
            return replace(found, neighbours=links.neighbours(snap.conn, session_id))

    def similar_sessions(self, session_id: str) -> list[SimilarSession]:
        """Other conversations closest in meaning to this one (search/similar.py), in
        this reader's scope; NotFoundError for a session it does not hold."""
        with self.snapshot() as snap:
            held = snap.conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,))
            if held.fetchone() is None:
                raise NotFoundError(f"no session {session_id!r}")
            lineage = self._lineage.get(snap.conn, snap.state, snap.version())
            return similar_sessions(snap.conn, self.meaning, lineage, session_id)

    def session_page(
        self, session_id: str, request: TranscriptRequest, *, page_size: int | None = PAGE_SIZE
    ) -> SessionPage:
        """The session screen in one snapshot: one page of the transcript (every message
        with ``page_size=None``: the JSON API), its chain neighbours, the query's matches
        on the pages, and the chain it belongs to (its part, its relatives, its cost by
        the chain table's rules)."""
        parsed = usable_query(request.query)
        with self.snapshot() as snap:
            found = load_transcript(
                snap.conn,
                session_id,
                include_inactive=request.include_inactive,
                page=request.page,
                at=request.at,
                page_size=page_size,
                view=request.view,
                epochs=self._epochs.get(snap.conn, [session_id]).get(session_id),
            )
            found = replace(found, neighbours=links.neighbours(snap.conn, session_id))
            chain = load_chain(snap.conn, session_id)
            if parsed is None or found.paging is None:
                return SessionPage(session_id, found, [], None, [], chain)
            ids = session_matches(snap.conn, snap.state, session_id, parsed)
            matches = match_entries(snap.conn, found.paging, ids)
        count = sum(1 for i in ids if found.paging.index_of(i) is not None)
        return SessionPage(session_id, found, parsed.highlight_terms(), count, matches, chain)

    def session_profile(self, session_id: str) -> str | None:
        """The profile a session belongs to (its ``profile`` column), if this reader's
        scope holds it: which profile a link to it is read in (web/profiles.py)."""
        with self.snapshot() as snap:
            row = snap.conn.execute(
                "SELECT profile FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
        return row[0] if row is not None else None

    def health(self) -> dict[str, Any]:
        """``{"status": "ok"}`` or the reason the store cannot be read."""
        try:
            with self.snapshot() as snap:
                snap.conn.execute("SELECT 1 FROM sessions LIMIT 1").fetchall()
        except StoreUnavailableError as exc:
            return {"status": "unavailable", "reason": exc.reason, "path": str(self.path)}
        except sqlite3.Error as exc:
            return {"status": "unavailable", "reason": "corrupt", "detail": str(exc)}
        return {"status": "ok", "path": str(self.path)}

    @property
    def spans_profiles(self) -> bool:
        """Whether this reader's answers mix profiles (every profile, and 2+ of them):
        the pages then name each row's profile and count by profile."""
        return self.scope.spans(self.profiles)

    def search(self, request: SearchRequest) -> SearchResult:
        """Stage-1 search (or the recent-sessions browse for an empty query)."""
        with self.snapshot() as snap:
            return self._search(snap, request)

    def _search(self, snap: Snapshot, request: SearchRequest) -> SearchResult:
        version = snap.version()
        return search_sessions(
            snap.conn,
            snap.state,
            request,
            self._lineage.get(snap.conn, snap.state, version),
            self._epochs,
            scoped=not self.scope.everything,
            by_profile=self.spans_profiles,
            row_maps=self._row_maps,
            version=version,
            meaning=self.meaning,
        )

    def warm_search(self) -> None:
        """Read what a search needs of the whole archive (the session graph, the message
        map, the epochs of the sessions holding archived rows) so that the next one finds
        them ready: after each sync pass, from the syncer's thread (at 1M messages the
        map's first build is ~0.4 s of CPU, the epochs' ~2 s; later passes extend the map
        and check each session's epochs by its row count and newest id). A query's first
        search otherwise derived the epochs of the in-place sessions among its hits: 50–100
        ms of a 1M archive's first answers. A fault is left to the pages to say."""
        try:
            with self.snapshot(sync=False) as snap:
                version = snap.version()
                self._lineage.get(snap.conn, snap.state, version)
                found = self._row_maps.get(snap.conn, snap.state, version)
                if found is not None:
                    self._epochs.warm(snap.conn, found.flags.with_archive)
                self.meaning.follow(snap.conn)
        except (StoreUnavailableError, sqlite3.Error):
            pass

    def search_page(self, request: SearchRequest | None, *, facets: bool = True) -> SearchPage:
        """The search screen in one snapshot: the filters' choices (sources, models) and
        ``request``'s results (None: the choices alone, for a request that could not be
        read). ``facets=False``: the results alone (the JSON API shows no filters; their
        counts cost a pass over the sessions)."""
        with self.snapshot() as snap:
            choices = session_facets(snap.conn) if facets else {}
            if request is None:
                return SearchPage(choices)
            try:
                return SearchPage(choices, request, self._search(snap, request))
            except ValidationError as exc:  # a query with nothing to search: the page says so
                return SearchPage(choices, request, error=str(exc))

    def said(self, request: SearchRequest, terms: Sequence[str]) -> list[SessionResult]:
        """Stage-1 search with each hit re-cut to what was said (:func:`said.said_only`),
        in one snapshot: the agent's recalled memories."""
        with self.snapshot() as snap:
            found = search_sessions(
                snap.conn,
                snap.state,
                request,
                self._lineage.get(snap.conn, snap.state, snap.version()),
                self._epochs,
                scoped=not self.scope.everything,
                row_maps=self._row_maps,
                meaning=self.meaning,
            )
            return said_only(snap.conn, found.results, terms)

    def matching_messages(self, session_id: str, query: str) -> list[int]:
        """Ids of the session's messages that ``query`` matches, each message once (a
        re-inserted copy as the row it repeats): what a card counts."""
        parsed = parse_query(query)
        with self.snapshot() as snap:
            ids = session_matches(snap.conn, snap.state, session_id, parsed)
            epochs = self._epochs.get(snap.conn, [session_id])
        folded, _ = fold_copies([(i, session_id) for i in ids], epochs)
        return [row[0] for row in folded]

    def chain_members(self, session_id: str) -> list[str]:
        """Every session of the compaction chain ``session_id`` belongs to (itself if none)."""
        with self.snapshot() as snap:
            lineage = self._lineage.get(snap.conn, snap.state, snap.version())
        return lineage.family(lineage.root(session_id))

    def last_message_id(self, session_id: str) -> int:
        """The newest message id of a session (what a cached summary depends on)."""
        with self.snapshot() as snap:
            return last_message_id(snap.conn, session_id)

    def chain(self, session_id: str, *, epochs: bool = False) -> Chain:
        """The lineage of a session: every segment, classified, with its figures
        (``epochs=True``: each segment's in-place epochs too, see :func:`load_chain`)."""
        with self.snapshot() as snap:
            return load_chain(snap.conn, session_id, epochs=epochs)

    def archive_page(self, presence: str, page: int, now: float | None = None) -> ArchivePage:
        """The archive screen: the prune radar (each profile's, reading every profile) and
        one page of the archive's sessions ``presence`` keeps, in this reader's scope.

        In the one snapshot: the listing and every radar's check against the archive.
        Not in it: each radar's source (Hermes's own file, read beside it). The page
        reads the archive as it is (no sync first), and an archive that cannot be opened
        is said on the page, not raised (:func:`archive.listing.archive_page` opens it
        itself and says why).
        """
        profiles = self.profiles if self.spans_profiles else ()

        def shown(conn: sqlite3.Connection | None) -> ArchivePage:
            return archive_page(
                self.home,
                self.path,
                presence,
                page,
                now,
                continues=links.continues,
                profiles=profiles,
                scope=self.scope,
                conn=conn,
            )

        try:
            with self.snapshot(sync=False) as snap:
                return shown(snap.conn)
        except StoreUnavailableError:
            return shown(None)

    def chain_page(self, session_id: str) -> ChainPage:
        """The chain screen (and its JSON): the session's chain with every segment's
        epochs, in one snapshot; the family's totals are summed from it."""
        return ChainPage(self.chain(session_id, epochs=True))

    def chains_index(
        self, sort: str = "last", descending: bool = True, limit: int = INDEX_LIMIT
    ) -> ChainIndex:
        """The compaction chains, first ``limit`` by ``sort`` (see :func:`chain_index`)."""
        with self.snapshot() as snap:
            lineage = self._lineage.get(snap.conn, snap.state, snap.version())
            in_place = self._in_place.get(snap.conn, snap.state, snap.version())
            return chain_index(
                snap.conn, lineage, sort=sort, descending=descending, limit=limit, in_place=in_place
            )

    def stitched(
        self, session_id: str, include_inactive: bool = False
    ) -> tuple[Chain, list[StitchedPart]]:
        """The continuation line through a session as one conversation, with its chain."""
        with self.snapshot() as snap:
            chain = load_chain(snap.conn, session_id)
            parts = load_stitched(snap.conn, chain, include_inactive=include_inactive)
            return chain, parts

    def stitched_page(self, session_id: str, request: TranscriptRequest) -> StitchedScreen:
        """One page of the continuation line through a session, as one conversation, and
        its chain, in one snapshot (``request.query``'s terms to mark)."""
        terms = highlight_terms(request.query)
        with self.snapshot() as snap:
            chain = load_chain(snap.conn, session_id)
            page = load_stitched_page(
                snap.conn,
                chain,
                include_inactive=request.include_inactive,
                page=request.page,
                at=request.at,
                page_size=PAGE_SIZE,
                view=request.view,
            )
            return StitchedScreen(chain, page, terms)
