"""Reading a later message against a memory entry: may it overturn it?"""

from __future__ import annotations

import pytest

from dashboard.memory.staleness import KINDS, could_supersede, read_message, shared_words, things

STACK = "Stack: Python 3.12, FastAPI, Postgres 16, Redis 7, Docker Compose locally."


@pytest.mark.parametrize(
    ("entry", "message", "reasons", "quote"),
    [
        (  # the seed article's pair: the message never says "Python"
            "Prefers Python for scripts",
            "Heads-up: I'm mostly writing Go now. The rest is the same.",
            ("names go where the entry names python", "says “now”"),
            "Heads-up: I'm mostly writing Go now.",
        ),
        (
            STACK,
            "The services left FastAPI in October; Python is only for scripts these days.",
            ("moves away from fastapi", "says “left”"),
            "The services left FastAPI in October; Python is only for scripts these days.",
        ),
        (
            STACK,
            "we moved to MySQL last week",
            ("names mysql where the entry names postgres", "says “moved to”"),
            "we moved to MySQL last week",
        ),
        (
            "Prefers Python",
            "我现在改用Go了。",
            ("names go where the entry names python", "says “现在”"),
            "我现在改用Go了。",
        ),
        (
            "Editor: neovim",
            "I no longer use vim, I switched to Zed.",
            ("names zed where the entry names neovim", "says “no longer”"),
            "I no longer use vim, I switched to Zed.",
        ),
        (
            "Works night shifts",
            "I no longer work night shifts, I'm on days now.",
            ("moves away from night, shifts", "says “no longer”"),
            "I no longer work night shifts, I'm on days now.",
        ),
        (
            "Runs on Go 1.22",
            "we are on go 1.23 now and Rust for the CLI",
            ("names rust where the entry names go", "says “now”"),
            "",
        ),
    ],
)
def test_a_change_with_an_alternative_or_a_retraction_may_supersede(
    entry: str, message: str, reasons: tuple[str, ...], quote: str
) -> None:
    words = [w for w in entry.casefold().replace(":", " ").split() if len(w) >= 4]
    reading = read_message(entry, message, words)
    assert reading.may_supersede
    assert reading.reasons == reasons
    assert reading.quote == (quote or message)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("Prefers Python for scripts", "why does my python script leak memory?"),  # same, no change
        ("Prefers Python for scripts", "ok go ahead and restart it now"),  # "go", the verb
        ("Prefers Python for scripts", "I tried Go once, years ago."),  # no change said
        ("Prefers Python for scripts", "Ran `go build` now, see:\n```\ngo: go.mod now\n```"),
        ("Editor: neovim", "I no longer use vim."),  # vim was never the entry's
        (STACK, "we run k8s-node-7 now"),  # a host's name, not Kubernetes
        ("Redis worker pool size is 20", "I stopped the worker now"),  # no habit dropped
        (STACK, "Our fastapi app now returns 500s"),  # the entry's own things, still used
    ],
)
def test_words_on_the_subject_alone_never_flag(entry: str, message: str) -> None:
    words = [w for w in entry.casefold().split() if len(w) >= 4]
    assert not read_message(entry, message, words).may_supersede


def test_the_unflagged_reading_still_names_what_it_saw() -> None:
    reading = read_message("Prefers Python", "Is Go faster than this for the parser?")
    assert not reading.may_supersede and reading.change is None
    assert reading.alternatives == (("language", "python", "go"),)
    assert reading.reasons == ("names go where the entry names python",)  # no change said


def test_things_are_read_by_kind_with_aliases_and_names_written_as_names() -> None:
    assert things("Golang, Postgresql and nvim") == {
        "language": {"go"},
        "database": {"postgres"},
        "editor": {"neovim"},
    }
    assert things("let's go", strict=True) == {}
    assert things("Let's use Go", strict=True) == {"language": {"go"}}  # a name, as written
    assert things("go 1.23", strict=True) == {"language": {"go"}}
    assert all(name == name.casefold() for kind in KINDS.values() for name in kind.values())


def test_shared_words_leave_code_out() -> None:
    words = ("python", "fastapi", "postgres")
    assert shared_words(words, "Python and `postgres` and FastAPI") == ("python", "fastapi")


@pytest.mark.parametrize(
    ("message", "named"),
    [
        ("Go ahead and restart it now.", False),  # a sentence's first word
        ("Done. Go ahead now.", False),
        ("I write Go now.", True),
        ("We moved to GO last year.", True),
        ("go 1.23 is out now", True),
        ("let's go now", False),
    ],
)
def test_an_everyday_word_counts_as_a_name_only_written_as_one(message: str, named: bool) -> None:
    assert bool(things(message, strict=True)) is named


def test_the_first_look_keeps_what_may_supersede_and_drops_logs() -> None:
    assert could_supersede("Heads-up: I'm mostly writing Go now.")
    assert not could_supersede("here:\n```\nGo runtime now panics: MySQL gone\n```")
    assert not could_supersede("I write Go.")  # no change said
