"""The ``recall`` command: search, info, demo (run as real processes)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from dashboard.demo.build import build_demo_home
from dashboard.demo.plan import anchor_for
from dashboard.demo.story import scenes
from tests.support import hermes_shapes as shapes


def recall(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dashboard.cli", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )


def test_search_prints_grouped_results(hermes_home: Path) -> None:
    out = recall("search", shapes.UNIQUE_WORD, "--home", str(hermes_home))
    assert out.returncode == 0, out.stderr
    assert shapes.S_ROOT in out.stdout and f"«{shapes.UNIQUE_WORD}»" in out.stdout


def test_search_says_which_compaction_a_hit_came_before(tmp_path: Path) -> None:
    shapes.build_epochs_home(tmp_path / "home")
    out = recall("search", shapes.EPOCH1_WORD, "--home", str(tmp_path / "home"))
    assert out.returncode == 0, out.stderr
    assert f"«{shapes.EPOCH1_WORD}» question · before compaction 1 of 3" in out.stdout


def test_search_json_is_the_api_shape(hermes_home: Path) -> None:
    out = recall(
        "search",
        "pool",
        "--home",
        str(hermes_home),
        "--json",
        "--limit",
        "2",
        "--role",
        "user",
        "--source",
        "cli",
        "--source",
        "telegram",
    )
    body = json.loads(out.stdout)
    assert body["per_page"] == 2 and body["route"] == "unicode61"
    assert all(h["role"] == "user" for r in body["results"] for h in r["hits"])
    assert {r["source"] for r in body["results"]} <= {"cli", "telegram"}


def test_search_errors_are_clear(hermes_home: Path, tmp_path: Path) -> None:
    bad = recall("search", "AND OR", "--home", str(hermes_home))
    assert bad.returncode == 2 and "Nothing to search for" in bad.stderr
    missing = recall("search", "x", "--home", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "missing" in missing.stderr


def test_info_reports_the_layout(hermes_home: Path) -> None:
    out = recall("info", "--home", str(hermes_home), "--json")
    body = json.loads(out.stdout)
    # The counts are the archive's; the layout reported is the source's (what Hermes wrote).
    assert body["source"]["layout"]["fts_form"] == "views"
    assert body["sessions"] == len(shapes.SESSION_IDS) and body["layout"]["recall_version"]


def test_demo_refuses_to_overwrite(tmp_path: Path) -> None:
    first = recall(
        "demo",
        "--home",
        str(tmp_path / "d"),
        "--sessions",
        "6",
        "--messages",
        "60",
        "--anchor",
        "2026-11-30",
    )
    story = len(scenes(anchor_for("2026-11-30")))  # the demo's scripted conversations too
    assert first.returncode == 0 and f"{6 + story} sessions" in first.stdout
    again = recall("demo", "--home", str(tmp_path / "d"), "--sessions", "6")
    assert again.returncode == 2 and "refusing to overwrite" in again.stderr
    kept = recall("demo", "--home", str(tmp_path / "d"), "--if-missing")
    assert kept.returncode == 0


def test_search_with_summaries_is_the_tool_shape(hermes_home: Path, tmp_path: Path) -> None:
    import os

    from tests.support.llm_stub import StubLLM

    with StubLLM() as stub:
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "dashboard.cli",
                "search",
                "pool",
                "--summaries",
                "--json",
                "--home",
                str(hermes_home),
                "--data-dir",
                str(tmp_path / "data"),
                "--limit",
                "2",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "RECALL_LLM_BASE_URL": stub.url, "RECALL_LLM_MODEL": "stub"},
        )
        assert out.returncode == 0, out.stderr
        body = json.loads(out.stdout)
        assert body["success"] and body["count"] == len(body["results"]) <= 2
        assert all("summary" in r and r["when"] for r in body["results"])
        assert len(stub.requests) == body["count"]


def test_preview_prints_the_block_and_writes_nothing(tmp_path: Path) -> None:
    from dashboard.store.records import NewMessage
    from dashboard.store.session_store import SessionStore

    home = tmp_path / "home"
    (home / "memories").mkdir(parents=True)
    (home / "memories" / "USER.md").write_text("Name: Ada", encoding="utf-8")
    with SessionStore(home / "state.db") as store:
        store.create_session("cli", session_id="s1", model="m-1")
        store.append_messages("s1", [NewMessage("user", "the heron migration")])
    before = (home / "state.db").read_bytes()
    done = recall("preview", "how did the heron migration go?", "--home", str(home))
    assert done.returncode == 0, done.stderr
    assert "USER PROFILE (who the user is)" in done.stdout and "Name: Ada" in done.stdout
    assert "# Relevant Memories" in done.stdout and "the heron migration" in done.stdout
    assert done.stdout.rstrip().endswith("Session: (new session)\nModel: m-1")
    assert "characters, about" in done.stderr
    as_json = json.loads(recall("preview", "heron", "--home", str(home), "--json").stdout)
    assert [p["kind"] for p in as_json["parts"]] == ["user", "memory", "recalled", "context"]
    inside = recall("preview", "heron", "--home", str(home), "--session", "s1", "--json")
    assert json.loads(inside.stdout)["parts"][2]["text"] == ""  # its own chain is left out
    assert (home / "state.db").read_bytes() == before


def test_preview_errors_are_clear(tmp_path: Path, hermes_home: Path) -> None:
    missing = recall("preview", "x", "--home", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "state.db: missing" in missing.stderr
    unknown = recall("preview", "x", "--home", str(hermes_home), "--session", "nope")
    assert unknown.returncode == 2 and "'nope' does not exist" in unknown.stderr


def _fresh_machine(tmp_path: Path) -> dict[str, str]:
    """The environment of a machine with no ~/.hermes and no $HERMES_HOME."""
    env = {k: v for k, v in os.environ.items() if k != "HERMES_HOME"}
    env.update(HOME=str(tmp_path / "user"), XDG_DATA_HOME=str(tmp_path / "xdg"))
    return env


def test_search_info_and_preview_on_a_fresh_machine_use_the_demo_home(tmp_path: Path) -> None:
    env = _fresh_machine(tmp_path)
    demo = tmp_path / "xdg" / "recall" / "demo-home"
    built = build_demo_home(demo, sessions=30, messages=600, anchor_day="2026-11-30")
    for args in (("search", "redis"), ("info",), ("preview", "how is the redis cache set up?")):
        done = recall(*args, env=env)
        assert done.returncode == 0, (args, done.stderr)
        assert f"using the demo home in {demo}" in done.stderr, (args, done.stderr)
    info = json.loads(recall("info", "--json", env=env).stdout)
    assert info["home"] == str(demo) and info["sessions"] == built.sessions
    assert not (tmp_path / "user" / ".hermes").exists()


# The real command line with a smaller demo home: the size is not what the test below
# checks, and the full one (600 sessions) takes half a minute (bench/demo_build.py).
SMALL_DEMO = (
    "import sys; import dashboard.demo.home, dashboard.cli; dashboard.demo.home.DEMO_SESSIONS = 30;"
    " sys.exit(dashboard.cli.main(sys.argv[1:]))"
)


def test_info_on_a_fresh_machine_builds_the_demo_home_once_and_says_so(tmp_path: Path) -> None:
    env = _fresh_machine(tmp_path)
    demo = tmp_path / "xdg" / "recall" / "demo-home"
    small = [sys.executable, "-c", SMALL_DEMO, "info"]
    first = subprocess.run(small, capture_output=True, text=True, timeout=180, env=env)
    assert first.returncode == 0, first.stderr
    assert f"building a demo home in {demo}" in first.stderr
    assert (demo / "state.db").is_file() and str(demo) in first.stdout
    story = len(scenes(anchor_for(None)))  # the demo's scripted conversations too
    assert f"\n  {30 + story} sessions," in first.stderr  # the smaller demo: what was built
    again = recall("info", env=env)
    assert "building" not in again.stderr and "using the demo home" in again.stderr


# -- profiles (issue 17): --profile NAME|all and several --home ---------------------------


def _profiles_home(tmp_path: Path) -> shapes.ProfilesFacts:
    return shapes.build_profiles_home(tmp_path / "hermes")


def test_search_reads_the_profile_named_and_labels_hits_under_all(tmp_path: Path) -> None:
    facts = _profiles_home(tmp_path)
    home = ("--home", str(facts.root), "--source", "cron")
    default_word, legacy_word = facts.words["default"], facts.words["legacy"]
    alone = recall("search", default_word, *home, "--profile", "legacy")
    assert alone.returncode == 0, alone.stderr
    assert "\n0 sessions" in alone.stdout and shapes.S_CRON not in alone.stdout
    own = recall("search", legacy_word, *home, "--profile", "legacy")
    assert f"legacy:{shapes.S_CRON}" in own.stdout
    both = recall("search", f"{default_word} OR {legacy_word}", *home)  # all, by default
    assert both.returncode == 0, both.stderr
    told = recall("search", f"{default_word} OR {legacy_word}", *home, "--profile", "all")
    # The same cards (the first line says how long the search took).
    assert both.stdout.split("\n", 1)[1] == told.stdout.split("\n", 1)[1]
    lines = [line for line in both.stdout.splitlines() if shapes.S_CRON in line]
    assert len(lines) == 2
    assert any(line.startswith(f"  default · {shapes.S_CRON} ·") for line in lines), lines
    assert any(line.startswith(f"  legacy · legacy:{shapes.S_CRON} ·") for line in lines), lines
    # One profile's own search names no profile, as a home without profiles never did.
    assert not any(line.startswith("  legacy · ") for line in own.stdout.splitlines())


def test_a_look_alike_id_in_the_default_profile_swallows_no_profile(tmp_path: Path) -> None:
    """Issue 24: the default profile's session ``legacy:<id>`` stays the default's, and the
    legacy profile's ``<id>`` stays whole, through ``--profile`` either way."""
    facts = _profiles_home(tmp_path)
    crafted = shapes.add_lookalike_session(facts)
    home = ("--home", str(facts.root), "--source", "cli", "--source", "cron")
    mine = recall("search", shapes.LOOKALIKE_WORD, *home, "--profile", "default")
    assert mine.returncode == 0, mine.stderr
    assert f"  default:{crafted} ·" in mine.stdout and mine.stdout.startswith("1 sessions")
    theirs = recall("search", shapes.LOOKALIKE_WORD, *home, "--profile", "legacy")
    assert "\n0 sessions" in theirs.stdout and shapes.S_CRON not in theirs.stdout, theirs.stdout
    legacy = recall("search", facts.words["legacy"], *home, "--profile", "legacy", "--json")
    cards = json.loads(legacy.stdout)["results"]
    assert [c["session_id"] for c in cards] == [crafted]


def test_an_unknown_profile_exits_2_naming_the_profiles(tmp_path: Path) -> None:
    facts = _profiles_home(tmp_path)
    for args in (
        ("search", "x"),
        ("info",),
        ("preview", "x"),
        ("archive", "verify"),
        ("archive", "sync"),
        ("archive", "status"),
    ):
        out = recall(*args, "--home", str(facts.root), "--profile", "nope")
        assert out.returncode == 2, (args, out.stderr)
        assert "no profile called 'nope'" in out.stderr, (args, out.stderr)
        assert "default, empty, legacy" in out.stderr and "Traceback" not in out.stderr


def test_info_shows_each_profiles_figures(tmp_path: Path) -> None:
    facts = _profiles_home(tmp_path)
    counts = {
        name: sqlite3.connect(db).execute("SELECT count(*) FROM sessions").fetchone()[0]
        for name, db in facts.dbs.items()
    }
    body = json.loads(recall("info", "--home", str(facts.root), "--json").stdout)
    assert {n: p["sessions"] for n, p in body["profiles"].items()} == counts
    assert body["sessions"] == sum(counts.values())
    assert body["profiles"]["legacy"]["home"] == str(facts.root / "profiles" / "legacy")
    text = recall("info", "--home", str(facts.root)).stdout
    assert f"{'profile legacy':<20}{counts['legacy']} sessions" in text
    one = json.loads(
        recall("info", "--home", str(facts.root), "--profile", "legacy", "--json").stdout
    )
    assert one["sessions"] == counts["legacy"] and "profiles" not in one


def test_preview_reads_the_default_profile_unless_told(tmp_path: Path) -> None:
    facts = _profiles_home(tmp_path)
    plain = recall("preview", "the report job", "--home", str(facts.root))
    assert plain.returncode == 0, plain.stderr
    assert "The default profile's user." in plain.stdout and "legacy" not in plain.stdout
    legacy = recall("preview", "the report job", "--home", str(facts.root), "--profile", "legacy")
    assert "The legacy profile's user." in legacy.stdout and "default" not in legacy.stdout
    everything = recall("preview", "x", "--home", str(facts.root), "--profile", "all")
    assert everything.returncode == 2 and "one profile" in everything.stderr


def test_archive_commands_take_each_profile(tmp_path: Path) -> None:
    facts = _profiles_home(tmp_path)
    archive = ("--home", str(facts.root), "--archive", str(tmp_path / "archive.db"))
    synced = recall("archive", "sync", *archive, "--profile", "legacy")
    assert synced.returncode == 0, synced.stderr
    assert str(facts.root / "profiles" / "legacy") in synced.stdout
    assert f"archived {facts.root} " not in synced.stdout  # the default profile was not
    verified = recall("archive", "verify", *archive, "--profile", "legacy")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert str(facts.dbs["legacy"]) in verified.stdout and str(facts.dbs["default"]) not in (
        verified.stdout
    )
    # Under all (the default) the default profile is checked too: not archived yet.
    assert recall("archive", "verify", *archive).returncode == 1
    assert recall("archive", "sync", *archive).returncode == 0
    every = recall("archive", "verify", *archive, "--json")
    assert every.returncode == 0, every.stdout
    reports = json.loads(every.stdout)["profiles"]
    assert sorted(reports) == ["default", "empty", "legacy"] and all(
        r["ok"] for r in reports.values()
    )
    status = json.loads(recall("archive", "status", *archive, "--json").stdout)
    legacy_sessions = counts_of(facts.dbs["legacy"])
    assert status["profiles"]["legacy"]["from_home"]["sessions"] == legacy_sessions


def counts_of(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT count(*) FROM sessions").fetchone()[0]


def test_several_homes_are_read_together(tmp_path: Path) -> None:
    facts = _profiles_home(tmp_path)
    other = tmp_path / "work"
    shapes.build_current_views(other / "state.db")
    shapes.append_turn(other / "state.db", shapes.S_CRON, "the wombat deploy?", "wombat ok", 1.79e9)
    homes = ("--home", str(facts.root), "--home", str(other), "--source", "cron")
    found = recall("search", f"wombat OR {facts.words['legacy']}", *homes)
    assert found.returncode == 0, found.stderr
    assert f"  work · work:{shapes.S_CRON} ·" in found.stdout
    assert f"  legacy · legacy:{shapes.S_CRON} ·" in found.stdout
    only = recall("search", "wombat", *homes, "--profile", "work")
    assert f"work:{shapes.S_CRON}" in only.stdout
    info = json.loads(
        recall("info", "--home", str(facts.root), "--home", str(other), "--json").stdout
    )
    assert sorted(info["profiles"]) == ["default", "empty", "legacy", "work"]
