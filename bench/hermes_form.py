"""Copy a demo home (Recall's store) into today's Hermes layout, at bench scale.

The archive benches need a source that is not Recall's own store: today's Hermes
file (v23+, FTS through views, tool rows out of the trigram index, usage rows,
prompts by hash, ``active``/``compacted`` columns), built with the DDL of
``tests/support/hermes_shapes.py`` (the fixtures' record of that layout), filled with
``INSERT … SELECT`` and indexed with one ``'rebuild'`` per index, as fast as a
bulk load can be.

Usage: python bench/hermes_form.py --from DEMO_HOME --to NEW_HOME [--journal wal|delete]
"""

from __future__ import annotations

import argparse
import re
import shutil
import sqlite3
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support import hermes_shapes as hs

_TRIGGER = re.compile(r"CREATE TRIGGER .*?\bEND;", re.S)


def _columns(conn: sqlite3.Connection, schema: str, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA {schema}.table_info({table})")]


def to_current_views(source_home: Path, dest_home: Path, *, journal: str = "wal") -> Path:
    """Write ``dest_home/state.db`` in today's Hermes form from ``source_home``'s store."""
    dest_home.mkdir(parents=True, exist_ok=True)
    db = dest_home / "state.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    for name in ("config.yaml", "memories"):
        src = source_home / name
        if src.is_dir():
            shutil.copytree(src, dest_home / name, dirs_exist_ok=True)
        elif src.is_file():
            shutil.copy2(src, dest_home / name)
    fts = hs._CURRENT_FTS + hs._CURRENT_TRIGRAM
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute(f"PRAGMA journal_mode={journal}")
        conn.execute("PRAGMA synchronous=OFF")  # a bench file, rebuilt from scratch if cut off
        # Tables, views and the FTS tables first; the FTS triggers after the load.
        conn.executescript(hs._CURRENT_SCHEMA + _TRIGGER.sub("", fts))
        conn.execute("DROP TRIGGER messages_display_order_insert")
        conn.execute("ATTACH DATABASE ? AS src", (f"file:{source_home / 'state.db'}?mode=ro",))
        conn.execute("BEGIN")
        for table in ("sessions", "messages", "session_model_usage"):
            have = set(_columns(conn, "src", table))
            target = conn.execute(f"PRAGMA main.table_info({table})").fetchall()
            # (name, expression): NOT NULL columns with a default take it for a NULL.
            shared = [
                (r[1], f"coalesce({r[1]}, {r[4]})" if r[3] and r[4] is not None else r[1])
                for r in target
                if r[1] in have
            ]
            cols = ", ".join(name for name, _ in shared)
            values = ", ".join(expr for _, expr in shared)
            order = " ORDER BY started_at" if table == "sessions" else ""
            conn.execute(
                f"INSERT INTO main.{table} ({cols}) SELECT {values} FROM src.{table}{order}"
            )
        conn.execute("UPDATE messages SET display_order = id")
        conn.execute(
            "INSERT INTO state_meta (key, value) VALUES ('fts_storage_version', ?)",
            (str(hs.FTS_STORAGE_VERSION),),
        )
        conn.execute(
            "INSERT INTO schema_version (version) VALUES (?)", (hs.CURRENT_SCHEMA_VERSION,)
        )
        conn.execute("COMMIT")
        conn.execute("DETACH DATABASE src")
        for table in ("messages_fts", "messages_fts_trigram"):
            conn.execute(f"INSERT INTO {table}({table}) VALUES ('rebuild')")
        for trigger in _TRIGGER.findall(fts):
            conn.execute(trigger)
        conn.execute(
            "CREATE TRIGGER messages_display_order_insert AFTER INSERT ON messages "
            "WHEN new.display_order IS NULL BEGIN "
            "UPDATE messages SET display_order = new.id WHERE id = new.id; END"
        )
        if journal == "wal":
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return db


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--from", dest="source", required=True, help="a demo home")
    parser.add_argument("--to", dest="dest", required=True, help="the new home's folder")
    parser.add_argument("--journal", choices=("wal", "delete"), default="wal")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    db = to_current_views(Path(args.source), Path(args.dest), journal=args.journal)
    print(f"hermes_form {db} {db.stat().st_size / 1e6:.1f} MB in {time.perf_counter() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
