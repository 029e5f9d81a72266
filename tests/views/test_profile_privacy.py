"""``recall serve --profile NAME`` serves nothing of another profile (issue 17, item 5).

The archive holds every profile (an unrestricted Recall imported them all first: the
hard case). An app serving one profile is then walked: every rule of its URL map
(enumerated, so a new route is walked too, and fails here until it has a filler), its
path parameters filled with the other profiles' session ids, message ids and memory
revisions, its query parameters with their words, titles, memory texts and ids (a
sample of their session ids), as a page, as each HTMX partial, and the routes that
change things posted with a valid form token from this site. No answer may carry
anything of another profile, and an answer about another profile's thing must read
exactly like the answer about a thing that never existed (so not even its existence
leaks). The other profiles' memory files and archive rows stay as they were, and their
sources are never read.

The unrestricted app's ``?profile=`` is a scope, not a privacy boundary; the last test
checks that the main pages keep to it all the same.
"""

from __future__ import annotations

import html
import json
import re
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from urllib.parse import quote, quote_plus, urlencode

import pytest
from flask import Flask
from flask.testing import FlaskClient

from dashboard.app import ROOT
from dashboard.archive.marks import source_key
from dashboard.archive.syncer import SyncGroup
from dashboard.hermes.home import HermesHome
from dashboard.hermes.profiles import ALL, valid_name
from dashboard.memory.files import read_memory_file, save_memory_file
from dashboard.store.recalldb import RecallData
from tests.support import hermes_shapes as hs
from tests.support.app import make_app
from tests.support.open_files import open_files

PROFILES = ("default", "legacy", "empty")
ORIGIN = {"Origin": "http://localhost"}
# A session each profile alone holds (its own id, title and word), and one Hermes has
# since deleted (gone: the one kind of session the archive page lets a person delete).
PRIVATE = {
    "default": ("20261010_101010_d0d0d1", "Quarterly zither budget", "xylocarpine"),
    "legacy": ("20261011_111111_1e1e1e", "Orchard ledger review", "quokkaline"),
}
GONE = {
    "default": ("20260105_080000_90de01", "Marmalade pantry inventory", "marmalading"),
    "legacy": ("20260106_080000_90e901", "Tamarind harvest forecast", "tamarindous"),
}
# Said in each profile's source after the first import: never read by a Recall serving
# another profile.
LATE = {"default": "gloamingbell", "legacy": "nightjarrow", "empty": "fernwhistle"}
NEUTRAL = "A note the served profile keeps."
# A message id no profile has (the archive holds a few hundred).
NO_MESSAGE = 987_654_321


@dataclass
class World:
    """The three-profile home, its archive holding every profile, and what each owns."""

    facts: hs.ProfilesFacts
    data: Path
    homes: dict[str, Path]
    ids: dict[str, list[str]] = field(default_factory=dict)  # archive ids by profile
    messages: dict[str, list[int]] = field(default_factory=dict)  # private message ids
    revisions: dict[str, list[int]] = field(default_factory=dict)  # memory revision ids
    memory: dict[str, list[str]] = field(default_factory=dict)  # every text they held

    @property
    def archive(self) -> Path:
        return self.data / "archive.db"


def _add_sessions(facts: hs.ProfilesFacts) -> None:
    """Each non-empty profile's private and (later) gone session."""
    for name in PRIVATE:
        db = facts.dbs[name]
        for sid, title, word in (PRIVATE[name], GONE[name]):
            hs.start_session(db, sid, 1.791e9, title=title)
            hs.append_turn(
                db, sid, f"where is the {word} file?", f"the {word} file is here", 1.791e9 + 5
            )
            hs.end_session(db, sid, 1.791e9 + 60)


def _save_revisions(world: World) -> None:
    """Every profile's USER.md edited once through Recall: a revision each in recall.db."""
    data = RecallData(world.data / "recall.db")
    try:
        for name in PROFILES:
            home = HermesHome(world.homes[name])
            before = read_memory_file(home, "USER.md")
            text = f"{before.text.strip()}\n§\nThe {name} profile's heliotrope entry."
            saved = save_memory_file(
                home, "USER.md", text, base_sha256=before.sha256, data=data, note="edited in Recall"
            )
            world.revisions[name] = [
                r for r in (saved.revision_id, saved.replaced_revision_id) if r is not None
            ]
            world.memory[name] = [before.text.strip(), text.strip()] + [
                read_memory_file(home, "MEMORY.md").text.strip()
            ]
    finally:
        data.close()


def _stop(app: Flask) -> None:
    syncer = app.extensions.get("recall.syncer")
    if syncer is not None:
        syncer.stop()


def build_world(root: Path) -> World:
    facts = hs.build_profiles_home(root / "hermes")
    world = World(
        facts,
        root / "data",
        {
            "default": facts.root,
            "legacy": facts.root / "profiles" / "legacy",
            "empty": facts.root / "profiles" / "empty",
        },
    )
    _add_sessions(facts)
    _save_revisions(world)
    # The first import, by a Recall serving every profile; then Hermes deletes the
    # gone sessions and the next sync marks them.
    everything = make_app(facts.root, world.data)
    everything.test_client().get("/")
    # Closed, not only committed: an unclosed source connection lives until the garbage
    # collector runs, and the served profile's test then finds its source held open.
    for name in ("default", "legacy"):
        with closing(sqlite3.connect(facts.dbs[name])) as conn, conn:
            conn.execute("DELETE FROM messages WHERE session_id = ?", (GONE[name][0],))
            conn.execute("DELETE FROM sessions WHERE id = ?", (GONE[name][0],))
    everything.test_client().get("/")
    _stop(everything)
    with sqlite3.connect(world.archive) as conn:
        gone = {
            r[0]
            for r in conn.execute("SELECT id FROM sessions WHERE gone_from_source_at IS NOT NULL")
        }
        assert gone == {GONE["default"][0], f"legacy:{GONE['legacy'][0]}"}
        for name in PROFILES:
            world.ids[name] = [
                r[0]
                for r in conn.execute(
                    "SELECT id FROM sessions WHERE profile = ? ORDER BY id", (name,)
                )
            ]
            world.messages[name] = [
                r[0]
                for r in conn.execute(
                    "SELECT m.id FROM messages m JOIN sessions s ON s.id = m.session_id"
                    " WHERE s.profile = ? AND (m.content LIKE '%' || ? || '%'"
                    " OR m.session_id LIKE '%' || ? || '%') ORDER BY m.id",
                    (name, hs.PROFILE_WORDS[name], PRIVATE.get(name, ("-",))[0]),
                )
            ]
    assert world.ids["default"] and world.ids["legacy"] and not world.ids["empty"]
    # Hermes goes on in every profile after the import.
    for name in PROFILES:
        db = facts.dbs[name]
        if name == "empty":
            hs.start_session(db, "20261201_090000_e0e0e0", 1.792e9, title="Empty's first")
            hs.append_turn(db, "20261201_090000_e0e0e0", f"{LATE[name]}?", "yes", 1.792e9 + 1)
        else:
            hs.append_turn(db, hs.S_CRON, f"and {LATE[name]}?", f"{LATE[name]} too", 1.792e9)
    return world


# -- what belongs to another profile ---------------------------------------------------


@dataclass(frozen=True)
class Secrets:
    """What an app serving ``served`` must never show."""

    served: str
    texts: tuple[str, ...]  # words, titles, memory texts, paths, other-prefixed ids
    raw_ids: tuple[str, ...]  # the primary profile's ids (when another profile is served)
    names: tuple[str, ...] = ()  # the other profiles' names (as a label or a JSON value)


def secrets_of(world: World, served: str) -> Secrets:
    texts: list[str] = []
    raw: list[str] = []
    for name in PROFILES:
        if name == served:
            continue
        texts += [hs.PROFILE_WORDS[name], LATE[name]]
        for kept in (PRIVATE, GONE):
            texts += list(kept.get(name, ()))
        for text in world.memory[name]:
            texts += [e.strip() for e in text.split("§") if e.strip()]
        home = world.homes[name]
        texts += [str(home / "state.db"), str(home / "memories"), f"profile={name}"]
        if name == "default":
            raw += world.ids[name]
        else:
            texts += world.ids[name] + [f"{name}:"]
    names = tuple(p for p in PROFILES if p != served)
    return Secrets(served, tuple(dict.fromkeys(texts)), tuple(raw), names)


#: How a value can appear in an answer: as sent, escaped for HTML or JSON, in a URL.
FORMS = (
    lambda v: v,
    html.escape,
    lambda v: html.escape(v, quote=False),
    lambda v: quote(v, safe=""),
    lambda v: quote(v, safe="/:"),
    quote_plus,
    lambda v: json.dumps(v)[1:-1],
    lambda v: v.replace("'", "&#39;"),
    lambda v: v.replace("'", "&#39;").replace('"', "&#34;"),
)


@cache  # the walk asks for the forms of each secret thousands of times
def forms(value: str) -> tuple[str, ...]:
    return tuple(sorted({f(value) for f in FORMS} - {""}, key=len, reverse=True))


def without(text: str, values: list[str], mark: str = "\x00echo\x00") -> str:
    """``text`` with every form of ``values`` (what the request itself said) replaced;
    numbers stay (a short one is everywhere, and no number is a secret here)."""
    for value in sorted(values, key=len, reverse=True):
        if not value.isdigit():
            for form in forms(value):
                text = text.replace(form, mark)
    return text


def leaks(text: str, secrets: Secrets) -> list[str]:
    """The other profiles' things ``text`` carries."""
    found = [s for s in secrets.texts if any(f in text for f in forms(s))]
    if secrets.raw_ids:
        # The served profile's own ids carry the same source ids behind its prefix.
        prefix = re.escape(f"{secrets.served}:") + "|" + re.escape(f"{secrets.served}%3A")
        rest = re.sub(rf"(?i)(?:{prefix})\w+", "@", text)
        found += [sid for sid in secrets.raw_ids if re.search(rf"(?<!\w){re.escape(sid)}", rest)]
    # A profile's name shown as a label (a tab, a table cell, a facet) or a JSON value.
    found += [
        f"the name {n!r}"
        for n in secrets.names
        if re.search(rf'>\s*{n}\s*<|"profile":\s*"{n}"', text)
    ]
    return found


def control(value: str) -> str:
    """A value of the same shape that names nothing: letters shifted by one (ids keep
    their digits), a number far above any id. Of a ``<profile>:<id>`` only the profile
    is shifted: the id may rightly be the served profile's own."""
    if value.isdigit():
        return str(NO_MESSAGE + int(value))

    def shift(m: re.Match[str]) -> str:
        base = 65 if m[0] < "a" else 97
        return chr((ord(m[0]) - base + 1) % 26 + base)

    prefix, sep, rest = value.partition(":")
    if sep and rest and valid_name(prefix):
        return f"{re.sub(r'[A-Za-z]', shift, prefix)}:{rest}"
    return re.sub(r"[A-Za-z]", shift, value)


def tokens(text: str) -> list[str]:
    # How long a search took is the one thing two identical questions answer differently.
    for clock in (r"\d+ ms\b", r'"took_ms":[\d.]+', r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d"):
        text = re.sub(clock, "(clock)", text)
    return re.findall(r"\w+|\W", text)


def unexplained(theirs: str, blank: str, values: tuple[str, ...]) -> str | None:
    """Where the answer about another profile's ``values`` differs from the answer about
    their controls by more than the values themselves (None: nowhere)."""
    swap: dict[str, str] = {}
    for value in values:
        for form in FORMS:
            a, b = tokens(form(value)), tokens(form(control(value)))
            if len(a) == len(b):
                swap.update((x, y) for x, y in zip(a, b, strict=True) if x != y)
    # Same shape, so the same tokens but where a value stands in one for its control.
    a, b = tokens(theirs), tokens(blank)
    for i, (x, y) in enumerate(zip(a, b, strict=False)):  # noqa: B007 - i: where it breaks
        if x != y and swap.get(x) != y:
            break
    else:
        if len(a) == len(b):
            return None
        i = min(len(a), len(b))
    return f"{''.join(a[max(0, i - 30) : i + 30])!r} / {''.join(b[max(0, i - 30) : i + 30])!r}"


# -- the walk --------------------------------------------------------------------------

VIEWS = ROOT / "dashboard" / "views"


@cache
def htmx_targets() -> tuple[str, ...]:
    """Every partial a page renders for HTMX (render_page's target), read from the views."""
    found = set()
    for path in VIEWS.glob("*.py"):
        found |= set(
            re.findall(
                r'render_page\(\s*"[^"]+",\s*"[^"]+",\s*"([^"]+)"', path.read_text(encoding="utf-8")
            )
        )
    assert found
    return tuple(sorted(found))


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    params: tuple[tuple[str, str], ...]
    said: tuple[str, ...]  # the values this call sends (an answer may echo them)
    theirs: tuple[str, ...]  # those naming another profile's things
    headers: tuple[tuple[str, str], ...] = ()

    def url(self) -> str:
        return f"{self.path}?{urlencode(self.params)}" if self.params else self.path

    def controlled(self) -> Call:
        """The same call with another profile's values replaced by their controls."""
        shift = {v: control(v) for v in self.theirs}
        segments = {quote(v, safe="/:"): quote(c, safe="/:") for v, c in shift.items()}
        path = "/".join(segments.get(part, part) for part in self.path.split("/"))
        params = tuple((k, shift.get(v, v)) for k, v in self.params)
        said = tuple(shift.get(v, v) for v in self.said)
        return Call(self.method, path, params, said, (), self.headers)

    def partial(self, target: str) -> Call:
        headers = (("HX-Request", "true"), ("HX-Target", target))
        return Call(self.method, self.path, self.params, self.said, self.theirs, headers)


def path_fillers(world: World, served: str, name: str) -> tuple[list[str], list[str]]:
    """(the served profile's values, the other profiles' values) for path parameter ``name``."""
    others = [p for p in PROFILES if p != served]
    if name == "session_id":
        mine = [i for i in world.ids[served] if i.endswith(hs.S_CRON)]
        mine += [i for i in world.ids[served] if i not in mine] or [f"{served}:{hs.S_CRON}"]
        theirs = [i for p in others for i in world.ids[p]] + [f"empty:{hs.S_CRON}"]
        if served != "default":
            theirs.append(PRIVATE["default"][0])
        return mine, theirs
    if name == "revision_id":
        return (
            [str(r) for r in world.revisions[served]],
            [str(r) for p in others for r in world.revisions[p]],
        )
    if name == "which":
        return ["user", "memory"], []
    if name == "name":
        return ["USER.md", "MEMORY.md"], []
    if name == "filename":
        return ["app.css"], []
    if name == "profile":  # the approvals' decisions: this profile, and the others
        return [served], others
    if name == "record_id":
        return ["w1"], []
    if name == "decision":
        return ["approve", "reject"], []
    raise AssertionError(f"no filler for path parameter <{name}>: add one to this test")


def query_fillers(world: World, secrets: Secrets, served: str) -> list[tuple[tuple, tuple]]:
    """(params, another profile's values among them) for a route's query string: every
    parameter a view reads, filled with what the other profiles hold."""
    others = [p for p in PROFILES if p != served]
    # A memory text shares everyday words with the served profile's own history, so an
    # answer about it may rightly differ from one about its control: checked for leaks,
    # not compared.
    prose = {e.strip() for p in others for t in world.memory[p] for e in t.split("§")}
    # Of another profile's session ids (as a query value), a sample speaks for the rest:
    # its chain's first segment, its cron session (said in since the import), the
    # session it alone holds and the one Hermes deleted. In a path, every id is walked.
    sampled = {hs.S_ROOT, hs.S_CRON} | {
        kept[n][0] for n in others for kept in (PRIVATE, GONE) if n in kept
    }
    calls: list[tuple[tuple, tuple]] = [((), ())]
    for text in (t for t in secrets.texts if "/" not in t):
        prefix, sep, sid = text.partition(":")
        if sep and sid and prefix in others and sid not in sampled:
            continue
        theirs = () if text in prose else (text,)
        calls.append(
            (
                (
                    ("q", text),
                    ("query", text),
                    ("message", text),
                    ("deleted", text),
                    ("presence", "all"),
                ),
                theirs,
            )
        )
        calls.append(((("session", text), ("exclude", text), ("model", text)), theirs))
    calls += [((("profile", p),), (p,)) for p in others]
    calls.append(((("profile", ALL), ("presence", "all")), ()))
    calls.append(((("at", str(NO_MESSAGE)),), ()))
    calls += [((("at", str(m)),), (str(m),)) for p in others for m in world.messages[p]]
    calls += [
        ((("change", str(r)), ("before", str(r))), (str(r),))
        for p in others
        for r in world.revisions[p]
    ]
    return calls


def rule_paths(rule, world: World, served: str) -> Iterator[tuple[str, tuple, tuple]]:
    """(path, values said, another profile's values among them) for each filling of ``rule``."""
    names = sorted(rule.arguments)
    combos: list[tuple[dict[str, str], tuple[str, ...]]] = [({}, ())]
    for name in names:
        mine, theirs = path_fillers(world, served, name)
        options = [({name: v}, ()) for v in mine] + [({name: v}, (v,)) for v in theirs]
        combos = [({**a, **b}, x + y) for a, x in combos for b, y in options]
    for values, theirs in combos:
        path = rule.rule
        for name, value in values.items():
            path = re.sub(rf"<(?:[^:<>]+:)?{name}>", quote(value, safe="/:"), path)
        yield path, tuple(values.values()), theirs


def walk(app: Flask, world: World, served: str) -> Iterator[Call]:
    """Every GET of the walk over ``app.url_map`` (the other methods: :func:`posts`)."""
    queries = query_fillers(world, secrets_of(world, served), served)
    for rule in sorted(app.url_map.iter_rules(), key=lambda r: r.rule):
        if "GET" not in rule.methods:
            continue
        paths = list(rule_paths(rule, world, served))
        own = [path for path, _, theirs in paths if not theirs]
        for path, said, theirs in paths:
            # Another profile's thing in the path: plainly and with a word. The served
            # profile's own: every query once per route (what its pages may add of the
            # others), dealt round its own paths, each of which has the first two too.
            if theirs or rule.endpoint == "static":
                chosen = queries[:2]
            else:
                k = own.index(path)
                chosen = [q for i, q in enumerate(queries) if i < 2 or i % len(own) == k]
            for params, values in chosen:
                said_too = tuple(v for _, v in params)
                yield Call("GET", path, params, said + said_too, theirs + values)


def csrf(client: FlaskClient) -> str:
    page = client.get("/").get_data(as_text=True)
    return re.search(r'<meta name="csrf-token" content="([^"]+)">', page).group(1)


def posts(app: Flask, world: World, served: str, token: str) -> Iterator[tuple[Call, dict]]:
    """Every call that changes something, with a valid token from this site, and its body
    (the served profile's files' hashes, so a save of its own goes through, and the
    others')."""
    others = [p for p in PROFILES if p != served]
    for rule in sorted(app.url_map.iter_rules(), key=lambda r: r.rule):
        for method in sorted(rule.methods - {"GET", "HEAD", "OPTIONS"}):
            for path, said, theirs in rule_paths(rule, world, served):
                for params in [(), *((("profile", p),) for p in others), (("profile", ALL),)]:
                    own = HermesHome(world.homes[served])
                    mine = [read_memory_file(own, n).sha256 for n in ("USER.md", "MEMORY.md")]
                    hashes = mine + [
                        read_memory_file(HermesHome(world.homes[p]), "USER.md").sha256
                        for p in others
                    ]
                    for sha in hashes:
                        body = {
                            "csrf_token": token,
                            "base_sha256": sha,
                            "text": NEUTRAL,
                            "op": "add",
                            "index": "0",
                            "value": NEUTRAL,
                            "json": {"content": NEUTRAL, "base_hash": sha},
                        }
                        values = tuple(v for _, v in params if v != ALL)
                        yield (
                            Call(
                                method,
                                path,
                                params,
                                said + values,
                                theirs + values,
                                tuple(ORIGIN.items()),
                            ),
                            body,
                        )


def send(client: FlaskClient, call: Call, body: dict | None = None):
    headers = dict(call.headers)
    if call.method == "GET":
        return client.get(call.url(), headers=headers)
    assert body is not None
    if call.method == "PUT":
        headers["X-CSRF-Token"] = body["csrf_token"]
        return client.put(call.url(), json=body["json"], headers=headers)
    form = {k: v for k, v in body.items() if k != "json"}
    return client.open(call.url(), method=call.method, data=form, headers=headers)


def answer(client: FlaskClient, response) -> str:
    """What a response tells: its body, the headers a browser acts on, and the page a
    redirect (a save's) sends the browser to."""
    told = [response.get_data(as_text=True), response.headers.get("Location", "")]
    told += response.headers.getlist("Set-Cookie")
    response.close()  # a static file's answer holds the file open until then
    location = response.headers.get("Location", "")
    if response.status_code in (301, 302, 303) and location.startswith("/"):
        told.append(answer(client, client.get(location)))
    return "\n".join(told)


def check(
    client: FlaskClient, call: Call, secrets: Secrets, body: dict | None = None
) -> tuple[list[str], str]:
    """What is wrong with ``call``'s answer (nothing: an empty list), and the answer."""
    response = send(client, call, body)
    problems = []
    where = f"{call.method} {call.url()} {dict(call.headers) or ''}"
    if response.status_code >= 500:
        problems.append(f"{where}: {response.status_code}")
    told = answer(client, response)
    # A name the request itself says (a word of its query) may come back as a search term.
    words = {w for v in call.said for w in re.findall(r"\w+", v)}
    unsaid = replace(secrets, names=tuple(n for n in secrets.names if n not in words))
    found = leaks(without(told, list(call.said)), unsaid)
    if found:
        problems.append(f"{where}: shows {found}")
    if call.theirs and call.method == "GET":
        twin = call.controlled()
        blank = send(client, twin)
        differs = unexplained(told, answer(client, blank), call.theirs)
        if response.status_code != blank.status_code or differs:
            problems.append(
                f"{where}: {response.status_code}, unlike {twin.url()} "
                f"({blank.status_code}): {differs}"
            )
    return problems, told


def check_get(client: FlaskClient, call: Call, secrets: Secrets) -> tuple[list[str], int]:
    """:func:`check` the page, then each HTMX partial it holds; (problems, calls made)."""
    problems, told = check(client, call, secrets)
    calls = 1
    for target in htmx_targets():
        if f'id="{target}"' in told:
            problems += check(client, call.partial(target), secrets)[0]
            calls += 1
    return problems, calls


def archive_rows(world: World, served: str) -> list[tuple]:
    """Every row of the other profiles in the archive (sessions, messages, usage)."""
    with sqlite3.connect(world.archive) as conn:
        rows = conn.execute(
            "SELECT * FROM sessions WHERE profile != ? ORDER BY id", (served,)
        ).fetchall()
        rows += conn.execute(
            "SELECT m.* FROM messages m JOIN sessions s ON s.id = m.session_id"
            " WHERE s.profile != ? ORDER BY m.id",
            (served,),
        ).fetchall()
        rows += conn.execute(
            "SELECT u.* FROM session_model_usage u JOIN sessions s ON s.id = u.session_id"
            " WHERE s.profile != ? ORDER BY u.rowid",
            (served,),
        ).fetchall()
    return rows


def source_meta(world: World, served: str) -> dict[str, str]:
    """The archive's ``state_meta`` rows about the other profiles' sources."""
    keys = [source_key(world.homes[p]) for p in PROFILES if p != served]
    with sqlite3.connect(world.archive) as conn:
        return {
            k: v
            for k, v in conn.execute("SELECT key, value FROM state_meta")
            if any(k.endswith(key) for key in keys)
        }


def memory_bytes(world: World, served: str) -> dict[str, bytes]:
    out = {}
    for p in PROFILES:
        if p != served:
            for f in sorted((world.homes[p] / "memories").iterdir()):
                out[str(f)] = f.read_bytes()
    return out


# -- the tests -------------------------------------------------------------------------


@pytest.mark.parametrize("served", ["legacy", "default"])
def test_a_served_profile_shows_nothing_of_the_others_on_any_route(
    tmp_path: Path, served: str
) -> None:
    world = build_world(tmp_path)
    secrets = secrets_of(world, served)
    before = (archive_rows(world, served), memory_bytes(world, served), source_meta(world, served))
    app = make_app(world.facts.root, world.data, PROFILE=served)
    client = app.test_client()
    problems: list[str] = []
    calls = 0
    for call in walk(app, world, served):
        found, made = check_get(client, call, secrets)
        problems += found
        calls += made
    token = csrf(client)
    for call, body in posts(app, world, served, token):
        problems += check(client, call, secrets, body)[0]
        calls += 1
    # The served profile's own files hold nothing of the others either.
    own = (world.homes[served] / "memories").iterdir()
    problems += [
        f"{f} holds {leaks(f.read_text(encoding='utf-8'), secrets)}"
        for f in own
        if leaks(f.read_text(encoding="utf-8"), secrets)
    ]
    assert not problems, f"{len(problems)} of {calls} calls:\n" + "\n".join(problems[:60])
    after = (archive_rows(world, served), memory_bytes(world, served), source_meta(world, served))
    assert after[1] == before[1], "another profile's memory file changed"
    assert after[0] == before[0], "another profile's archive rows changed"
    assert after[2] == before[2], "another profile's source was synced"
    _stop(app)


@pytest.mark.parametrize("served", ["legacy", "default"])
def test_a_served_profile_syncs_and_opens_its_own_source_only(tmp_path: Path, served: str) -> None:
    world = build_world(tmp_path)
    before = source_meta(world, served)
    app = make_app(world.facts.root, world.data, PROFILE=served)
    client = app.test_client()
    assert client.get("/").status_code == 200
    syncer = app.extensions["recall.syncer"]
    members = syncer.members if isinstance(syncer, SyncGroup) else [syncer]
    assert [m.state_db for m in members] == [world.facts.dbs[served]]
    # No source is held open between passes (the syncer watches with stat alone), and
    # no other profile's file is open at all.
    held = open_files()
    assert not [f for f in held if f.startswith(str(world.facts.dbs[served]))]
    others = [str(world.facts.dbs[p]) for p in PROFILES if p != served]
    assert not [f for f in held if any(f.startswith(o) for o in others)]
    # What Hermes said since the first import: the served profile's is archived, the
    # others' are not, and nothing about their sources was written.
    with sqlite3.connect(world.archive) as conn:
        said = {
            w: conn.execute(
                "SELECT count(*) FROM messages WHERE content LIKE ?", (f"%{w}%",)
            ).fetchone()[0]
            for w in LATE.values()
        }
    assert said[LATE[served]] > 0
    assert [w for p, w in LATE.items() if p != served and said[w]] == []
    assert source_meta(world, served) == before
    _stop(app)


def test_the_scope_of_one_profile_shows_nothing_of_the_others_on_the_main_pages(
    tmp_path: Path,
) -> None:
    """Serving every profile, ``?profile=legacy`` is a scope (the switcher names the other
    profiles, ``/healthz`` every source), but search, session, chains, costs and overview
    keep to it."""
    world = build_world(tmp_path)
    secrets = secrets_of(world, "legacy")
    # The switcher names every profile (and links them): their names are no secret here.
    secrets = Secrets(
        "legacy", tuple(t for t in secrets.texts if not t.startswith("profile=")), secrets.raw_ids
    )
    app = make_app(world.facts.root, world.data)
    client = app.test_client()
    own = f"legacy:{hs.S_CRON}"
    words = [
        hs.PROFILE_WORDS["default"],
        PRIVATE["default"][2],
        PRIVATE["default"][1],
        GONE["default"][0],
        LATE["default"],
    ]
    calls = [
        Call("GET", path, (), (), ())
        for path in (
            "/",
            "/chains",
            "/costs",
            "/costs.csv",
            "/overview",
            "/api/search",
            "/api/costs",
            f"/sessions/{own}",
            f"/chains/{own}",
            f"/chains/{own}/transcript",
            f"/chains/legacy:{hs.S_ROOT}",
            f"/api/chains/{own}",
            f"/api/sessions/{own}/messages",
        )
    ]
    calls += [
        Call("GET", path, (("q", w),), (w,), (w,))
        for w in words
        for path in ("/", "/api/search", f"/sessions/{own}")
    ]
    calls += [
        Call("GET", f"/{page}/{sid}", (), (sid,), (sid,))
        for sid in world.ids["default"]
        for page in ("sessions", "chains", "api/chains")
    ]
    # A card's summary (its own request) keeps to the scope of the page that asked.
    calls += [
        Call("GET", f"/summaries/{sid}", (("q", w),), (sid, w), (sid,))
        for sid in world.ids["default"][:3] + [PRIVATE["default"][0]]
        for w in words[:2]
    ]
    calls += [
        Call("GET", "/costs", (("by", by), ("from", "2020-01-01")), (), ())
        for by in ("provider", "model", "source", "task")
    ]
    problems: list[str] = []
    for call in calls:
        scoped = Call(
            call.method, call.path, (*call.params, ("profile", "legacy")), call.said, call.theirs
        )
        problems += check_get(client, scoped, secrets)[0]
    assert not problems, "\n".join(problems[:40])
    # The same walk reads the default profile when asked: the checks can see it.
    everything = client.get(f"/?q={hs.PROFILE_WORDS['default']}&profile=default")
    assert leaks(everything.get_data(as_text=True), secrets)
    _stop(app)
