"""recall.db's schema: the cost rollup's tables hold the vectors costs.spend sums."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from dashboard.costs.spend import SUM_COLUMNS, TOKEN_COLUMNS
from dashboard.store import recalldb


def test_the_rollup_tables_are_written_with_the_columns_costs_sums():
    assert recalldb.ROLLUP_TOKEN_COLUMNS == TOKEN_COLUMNS
    assert recalldb.ROLLUP_SUM_COLUMNS == SUM_COLUMNS


def test_a_new_recall_db_has_every_rollup_table_with_those_columns(tmp_path: Path):
    data = recalldb.RecallData(tmp_path / "recall.db")
    with closing(sqlite3.connect(tmp_path / "recall.db")) as conn:

        def columns(table: str) -> list[str]:
            return [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]

        assert columns("cost_day")[7:] == list(SUM_COLUMNS)
        assert columns("cost_session_day")[5:] == list(SUM_COLUMNS)
        assert set(TOKEN_COLUMNS) <= set(columns("cost_row"))
        assert "profile" in columns("cost_day_sessions")
    data.close()
