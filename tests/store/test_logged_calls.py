"""store/logged_calls: the repricer's read of the calls the archive kept."""

from __future__ import annotations

import sqlite3

from dashboard.store.logged_calls import ArchivedCall, priced_calls
from dashboard.store.schema import CALLS_TABLE
from dashboard.store.session_store import SessionStore

_INSERT = (
    f"INSERT INTO {CALLS_TABLE} (src_home, session_id, number, at, model, provider,"
    " prompt_tokens, output_tokens, cache_read_tokens, cache_write_tokens)"
    " VALUES ('/h', ?, ?, ?, ?, 'openrouter', ?, ?, ?, ?)"
)


def _land(store: SessionStore, rows: list[tuple[object, ...]]) -> None:
    store.core.write(lambda c: c.executemany(_INSERT, rows))


def test_calls_by_session_and_model_in_order(store: SessionStore) -> None:
    _land(
        store,
        [
            ("s1", 2, 20.0, "big", 210_000, 50, 9_000, 0),
            ("s1", 1, 10.0, "big", 190_000, 40, 0, 500),
            ("s1", 1, 30.0, "big", 5_000, 10, 0, 0),  # the next turn: numbered from 1 again
            ("s1", 1, 15.0, "small", 300, 3, 0, 0),
            ("s1", 3, 40.0, "big", None, None, 0, 0),  # no usage logged: not priced
            ("s2", 1, 12.0, "big", 1_000, 1, 0, 0),
            (None, 1, 11.0, "big", 700, 7, 0, 0),  # untagged: no session's
        ],
    )
    got = priced_calls(store.core.conn, ["s1", "s1", "nobody"])
    assert set(got) == {("s1", "big"), ("s1", "small")}
    assert got[("s1", "big")] == [
        ArchivedCall(10.0, 1, "openrouter", 190_000, 40, 0, 500),
        ArchivedCall(20.0, 2, "openrouter", 210_000, 50, 9_000, 0),
        ArchivedCall(30.0, 1, "openrouter", 5_000, 10, 0, 0),
    ]
    assert priced_calls(store.core.conn, []) == {}


def test_many_sessions_are_read_in_chunks(store: SessionStore) -> None:
    ids = [f"s{i}" for i in range(1_234)]
    _land(store, [(sid, 1, float(i), "m", i, 1, 0, 0) for i, sid in enumerate(ids)])
    got = priced_calls(store.core.conn, iter(ids))
    assert len(got) == len(ids)
    assert got[("s1233", "m")][0].prompt == 1_233


def test_a_read_only_connection_reads_them(store: SessionStore) -> None:
    _land(store, [("s1", 1, 1.0, "m", 10, 1, 0, 0)])
    conn = sqlite3.connect(f"file:{store.path}?mode=ro", uri=True)
    try:
        assert list(priced_calls(conn, ["s1"])) == [("s1", "m")]
    finally:
        conn.close()
