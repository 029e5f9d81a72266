"""Where each entry came from: the rules of memory/provenance.py over given calls."""

from __future__ import annotations

from dashboard.hermes.memory_tool import FAILED, STAGED, WRITTEN, MemoryOp, MemoryResult
from dashboard.memory.entries import join_entries
from dashboard.memory.provenance import (
    EARLIER,
    FAILED_WRITE,
    TOUCHED,
    WROTE,
    MemoryCall,
    entry_provenance,
)


def call(
    n: int,
    action: str,
    content: str = "",
    old: str = "",
    status: str = WRITTEN,
    target: str = "user",
    session: str = "s1",
) -> MemoryCall:
    return MemoryCall(
        session,
        "default",
        100 + n,
        200 + n,
        1000.0 + n,
        MemoryOp(action, target, content, old),
        MemoryResult(status),
    )


def revision(rid: int, at: float, *entries: str) -> dict:
    return {"id": rid, "saved_at": at, "content": join_entries(entries), "note": None}


def roles(entry) -> list[tuple[int, str]]:
    return [(e.call.message_id, e.role) for e in entry.events]


def test_an_add_or_a_replace_of_the_same_text_wrote_it() -> None:
    calls = [call(1, "add", "Lives in Lisbon"), call(2, "replace", "Lives in Porto", "Lisbon")]
    [entry] = entry_provenance("Lives in Porto", "user", calls, [])
    assert roles(entry) == [(101, EARLIER), (102, WROTE)]
    assert entry.write_sessions == ("s1",) and not entry.no_transcript


def test_the_version_before_a_replace_comes_from_a_revision_too() -> None:
    calls = [call(5, "replace", "Lives in Porto", "Lisbon")]
    revisions = [revision(2, 2000.0, "Lives in Porto"), revision(1, 900.0, "Lives in Lisbon")]
    [entry] = entry_provenance("Lives in Porto", "user", calls, revisions)
    assert roles(entry) == [(105, WROTE)]
    # an older remove of that earlier version is its history
    calls = [call(1, "remove", old="in Lisbon"), *calls]
    [entry] = entry_provenance("Lives in Porto", "user", calls, revisions)
    assert roles(entry) == [(101, TOUCHED), (105, WROTE)]


def test_a_failed_write_never_counts_and_a_staged_one_does() -> None:
    calls = [call(1, "add", "Name: Ada", status=FAILED), call(2, "add", "Uses uv", status=STAGED)]
    ada, uv = entry_provenance(join_entries(["Name: Ada", "Uses uv"]), "user", calls, [])
    assert roles(ada) == [(101, FAILED_WRITE)] and ada.no_transcript and ada.writes == ()
    assert roles(uv) == [(102, WROTE)] and not uv.no_transcript


def test_a_remove_then_an_add_again_are_both_history() -> None:
    calls = [
        call(1, "add", "Has a cat"),
        call(2, "remove", old="cat", session="s2"),
        call(3, "add", "Has a cat", session="s3"),
    ]
    [entry] = entry_provenance("Has a cat", "user", calls, [])
    assert roles(entry) == [(101, WROTE), (102, TOUCHED), (103, WROTE)]
    assert entry.write_sessions == ("s1", "s3")


def test_only_calls_aimed_at_the_file_count() -> None:
    [entry] = entry_provenance("Uses uv", "user", [call(1, "add", "Uses uv", target="memory")], [])
    assert entry.events == () and entry.no_transcript


def test_an_entry_without_a_call_appeared_between_two_revisions() -> None:
    revisions = [
        revision(3, 3000.0, "Name: Ada", "Works night shifts"),
        revision(2, 2000.0, "Name: Ada", "Works night shifts"),
        revision(1, 1000.0, "Name: Ada"),
    ]
    ada, shifts = entry_provenance(
        join_entries(["Name: Ada", "Works night shifts"]), "user", [], revisions
    )
    assert shifts.no_transcript
    assert (shifts.appeared.first["id"], shifts.appeared.before["id"]) == (2, 1)
    assert (ada.appeared.first["id"], ada.appeared.before) == (1, None)  # in the oldest kept
    [entry] = entry_provenance("Something new", "user", [], revisions)
    assert entry.appeared is None  # not in the newest revision: Recall has not seen it yet


def test_entries_are_numbered_as_the_page_numbers_them_and_keep_their_text() -> None:
    entries = entry_provenance(" A \n§\n\n§\nB", "user", [call(1, "add", "A")], [])
    assert [(e.number, e.text) for e in entries] == [(1, " A "), (2, ""), (3, "B")]
    assert roles(entries[0]) == [(101, WROTE)] and entries[1].events == ()
