"""Read-only access to the state.db a dashboard shows (a user's home or a demo)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dashboard.costs.costly import (
    TOP_SESSIONS,
    CostlySessions,
    costly_sessions,
    rank_sessions,
    session_sums,
)
from dashboard.costs.rollup import CostRollup
from dashboard.costs.spend import (
    Spend,
    SpendMark,
    fingerprint,
    first_activity,
    plan,
    range_rows,
    spend,
)
from dashboard.errors import QuerySyntaxError, StoreUnavailableError
from dashboard.hermes.home import HermesHome
from dashboard.hermes.profiles import Profile, Scope, by_name
from dashboard.lineage import links
from dashboard.lineage.chains import Chain, load_chain
from dashboard.lineage.epochs import EpochsCache, in_place_counts
from dashboard.lineage.graph import LineageCache
from dashboard.lineage.index import INDEX_LIMIT, ChainIndex, chain_index
from dashboard.reader.overview import archive_counts, archive_overview, source_overview
from dashboard.search.cards import fold_copies
from dashboard.search.query import ParsedQuery, parse_query
from dashboard.search.said import said_only
from dashboard.search.sessions import (
    SearchRequest,
    SearchResult,
    SessionResult,
    search_sessions,
    session_facets,
    session_matches,
)
from dashboard.sessions.transcript import (
    PAGE_SIZE,
    SessionPage,
    StitchedPage,
    StitchedPart,
    Transcript,
    TranscriptRequest,
    last_message_id,
    load_stitched,
    load_stitched_page,
    load_transcript,
    match_entries,
)
from dashboard.store.readonly import classify, open_readonly, read_snapshot
from dashboard.store.scope import apply_scope
from dashboard.store.state import StoreState, read_state

SPEND_CACHE_SIZE = 32  # distinct (range, period, dimension, …) answers kept


def usable_query(text: str) -> ParsedQuery | None:
    """The parsed query, or None when there is nothing in it to search for or mark."""
    try:
        parsed = parse_query(text)
    except QuerySyntaxError:
        return None
    return None if parsed.empty else parsed


@dataclass(frozen=True)
class Snapshot:
    """One read connection to the archive, and its state (store_state.py)."""

    conn: sqlite3.Connection
    state: StoreState


class StateReader:
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
        # Spend answers, and the costly sessions of a range (keys start "sessions").
        self._spend_cache: dict[tuple, Any] = {}
        self._spend_lock = threading.Lock()

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
                )
                found._demo = self._demo
                self._scoped[profile] = found
            return found

    def open_for_rollup(self) -> sqlite3.Connection:
        """A read-only connection to the whole archive (every profile, whatever this
        reader's scope) that the cost rollup is built and brought up to date from."""
        if self._before_read is not None:
            self._before_read()
        conn = open_readonly(self.path)
        try:
            read_state(conn, self.path)  # the archive at the current schema, or why not
        except BaseException:
            conn.close()
            raise
        return conn

    @contextmanager
    def snapshot(self) -> Iterator[Snapshot]:
        """A read-only connection and the archive's state; errors become StoreUnavailableError."""
        if self._before_read is not None:
            self._before_read()
        conn = open_readonly(self.path)
        try:
            try:
                state = read_state(conn, self.path)
                apply_scope(conn, self.scope)
                yield Snapshot(conn, state)
            except sqlite3.DatabaseError as exc:
                # "database disk image is malformed" surfaces on the first page read.
                raise classify(exc, self.path) from exc
        finally:
            conn.close()

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
                conn = open_readonly(self.path, timeout=0, io_retries=0)
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
            info = archive_overview(snap.conn, self.path, by_profile=self.spans_profiles)
            info["is_demo"] = snap.state.is_demo
            if self.reads_archive:
                info["archive"] = archive_counts(snap.conn)
        if self.reads_archive:
            info["source"] = source_overview(self.home.state_db)
        if "profiles" in info:  # every profile: each one's figures and its own source
            found = info["profiles"]
            info["profiles"] = {
                p.name: {
                    **found.get(p.name, {"sessions": 0, "messages": 0}),
                    "source": source_overview(p.state_db),
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

    def session_page(self, session_id: str, request: TranscriptRequest) -> SessionPage:
        """One page of a session's transcript, its chain neighbours and the query's matches."""
        parsed = usable_query(request.query)
        with self.snapshot() as snap:
            found = load_transcript(
                snap.conn,
                session_id,
                include_inactive=request.include_inactive,
                page=request.page,
                at=request.at,
                page_size=PAGE_SIZE,
                view=request.view,
                epochs=self._epochs.get(snap.conn, [session_id]).get(session_id),
            )
            found = replace(found, neighbours=links.neighbours(snap.conn, session_id))
            if parsed is None or found.paging is None:
                return SessionPage(found, [], None, [])
            ids = session_matches(snap.conn, snap.state, session_id, parsed)
            matches = match_entries(snap.conn, found.paging, ids)
        count = sum(1 for i in ids if found.paging.index_of(i) is not None)
        return SessionPage(found, parsed.highlight_terms(), count, matches)

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
            return search_sessions(
                snap.conn,
                snap.state,
                request,
                self._lineage.get(snap.conn, snap.state),
                self._epochs,
                scoped=not self.scope.everything,
                by_profile=self.spans_profiles,
            )

    def said(self, request: SearchRequest, terms: Sequence[str]) -> list[SessionResult]:
        """Stage-1 search with each hit re-cut to what was said (:func:`said.said_only`),
        in one snapshot: the agent's recalled memories."""
        with self.snapshot() as snap:
            found = search_sessions(
                snap.conn,
                snap.state,
                request,
                self._lineage.get(snap.conn, snap.state),
                self._epochs,
                scoped=not self.scope.everything,
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
            lineage = self._lineage.get(snap.conn, snap.state)
        return lineage.family(lineage.root(session_id))

    def search_facets(self) -> dict[str, list[str]]:
        """Sources and models present, for the search filters."""
        with self.snapshot() as snap:
            return session_facets(snap.conn)

    def last_message_id(self, session_id: str) -> int:
        """The newest message id of a session (what a cached summary depends on)."""
        with self.snapshot() as snap:
            return last_message_id(snap.conn, session_id)

    def chain(self, session_id: str, *, epochs: bool = False) -> Chain:
        """The lineage of a session: every segment, classified, with its figures
        (``epochs=True``: each segment's in-place epochs too, see :func:`load_chain`)."""
        with self.snapshot() as snap:
            return load_chain(snap.conn, session_id, epochs=epochs)

    def chain_index(
        self, sort: str = "last", descending: bool = True, limit: int = INDEX_LIMIT
    ) -> ChainIndex:
        """The compaction chains, first ``limit`` by ``sort`` (see :func:`chain_index`)."""
        with self.snapshot() as snap:
            lineage = self._lineage.get(snap.conn, snap.state)
            in_place = self._in_place.get(snap.conn, snap.state)
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

    def stitched_page(
        self, session_id: str, request: TranscriptRequest
    ) -> tuple[Chain, StitchedPage]:
        """One page of the continuation line through a session, as one conversation."""
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
            return chain, page

    def costly_sessions(
        self,
        rollup: CostRollup | None = None,
        *,
        sort: str = "cost",
        descending: bool = True,
        **options: Any,
    ) -> CostlySessions:
        """The sessions that cost the most in a spend question's range (options as
        :meth:`spend`), from the rollup's rows once built, else the raw rows; kept while
        the spend fingerprint is unchanged."""
        with self.snapshot() as snap, read_snapshot(snap.conn):
            mark = fingerprint(snap.conn)
            key = ("sessions", sort, descending, repr(sorted(options.items())), mark)
            with self._spend_lock:
                hit = self._spend_cache.get(key)
            if hit is not None:
                return hit
            question = plan(**options)
            order = {"sort": sort, "descending": descending, "limit": TOP_SESSIONS}
            found = None
            if rollup is not None:
                with self._rollup_reading(snap, mark) as (conn, whole, scope):
                    asked = plan(**{**options, **scope})
                    found = rollup.session_sums(conn, asked, mark=whole, **order)
            if found is None:  # no rollup (yet): sum the raw rows by the same rules
                sums = session_sums(range_rows(snap.conn, question).values(), question)
                found = len(sums), rank_sessions(sums, **order)
            lineage = self._lineage.get(snap.conn, snap.state)
            result = costly_sessions(snap.conn, lineage, *found, sort=sort, descending=descending)
        with self._spend_lock:
            self._spend_cache[key] = result
            while len(self._spend_cache) > SPEND_CACHE_SIZE:
                self._spend_cache.pop(next(iter(self._spend_cache)))
        return result

    def first_activity(self) -> float | None:
        """When the first session started (the start of "all time" on the costs page)."""
        with self.snapshot() as snap:
            return first_activity(snap.conn)

    def spend(self, rollup: CostRollup | None = None, **options: Any) -> Spend:
        """Spend by period and dimension (see :func:`costs.plan` for the options).

        With a ``rollup`` (Recall's per-day sums) the answer comes from it once it is
        built, else from the raw rows. Answers are kept while the file's spend
        fingerprint is unchanged: the page, its CSV and the JSON ask the same
        question in a row.
        """
        with self.snapshot() as snap, read_snapshot(snap.conn):
            mark = fingerprint(snap.conn)
            key = (repr(sorted(options.items())), mark)
            with self._spend_lock:
                hit = self._spend_cache.get(key)
            if hit is not None:
                return hit
            result = None
            if rollup is not None:
                with self._rollup_reading(snap, mark) as (conn, whole, scope):
                    result = rollup.spend(conn, mark=whole, **{**options, **scope})
            if result is None:
                result = spend(snap.conn, **options)
        with self._spend_lock:
            self._spend_cache[key] = result
            while len(self._spend_cache) > SPEND_CACHE_SIZE:
                self._spend_cache.pop(next(iter(self._spend_cache)))
        return result

    @contextmanager
    def _rollup_reading(
        self, snap: Snapshot, mark: SpendMark
    ) -> Iterator[tuple[sqlite3.Connection, SpendMark | None, dict[str, Any]]]:
        """How the cost rollup is asked: ``(connection, its fingerprint, options)``.

        The rollup sums every profile and must be brought up to date from all of them,
        so a scoped reader, whose own connection sees one profile's rows, asks it through
        a connection to the whole archive (fingerprint read there) and filters the answer
        to its profiles (``profiles=``); a reader of every profile asks through its own.
        """
        if self.scope.everything:
            yield snap.conn, mark, {}
            return
        conn = self.open_for_rollup()
        try:
            yield conn, None, {"profiles": tuple(sorted(self.scope.names))}
        finally:
            conn.close()
