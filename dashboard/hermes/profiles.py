"""The profiles one Recall shows, and which of them a request may read.

A Hermes home is the profile ``default``; each ``profiles/<name>/`` inside it is a
home of its own (HERMES_FACTS, "Profiles"). Recall may also be given several homes:
the first one's profiles keep their names, a later home's root is named after its
folder and its profiles ``<folder>-<name>``, and a name taken twice gets ``-2``.

Every profile's history goes into the one archive. Hermes never shares session
records between profiles, but two profiles can hold the same session id (a copied
home, a restored backup), and a source id is any text: it can itself read
``<profile>:<id>``. :class:`ArchiveIds` is the one rule that names them in the archive:
a session of another profile than the first home's root is archived as
``<profile>:<id>``; the first home's root (the primary) keeps its ids as they are,
except an id holding ``:``, which is qualified like any other (``default:<id>``).
So an archive id without ``:`` is the primary's own, and one with ``:`` names its
profile before the first ``:`` (profile names have none): no two sessions of any
profiles share an archive id, and Hermes's own ids (``20260722_204335_d62c16``) stay
unchanged. The source id is kept in ``src_id``; which profile a row is, is its
``profile`` column, never read back from the id.

A :class:`Scope` is what one request reads: one profile or all of them
(``?profile=<name>|all``). ``StateReader`` applies it where the rows are read, on
the connection itself (temporary views over the archive's tables), so no query can
forget it.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dashboard.errors import ValidationError
from dashboard.hermes.conventions import profile_of
from dashboard.hermes.home import HermesHome

ALL = "all"  # the scope of every profile together
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
ID_SEPARATOR = ":"


def valid_name(name: str) -> bool:
    """Whether ``name`` can name a profile here (a URL parameter, an id prefix)."""
    return bool(_NAME.fullmatch(name)) and name != ALL


@dataclass(frozen=True)
class Profile:
    """One profile: its name in Recall and the home folder it is."""

    name: str
    home: HermesHome
    primary: bool = False  # the first home's root: its session ids are kept as they are

    @property
    def state_db(self) -> Path:
        return self.home.state_db

    @property
    def id_prefix(self) -> str:
        """What the archive puts before every session id of this profile ("" for the
        primary, whose ids are qualified only when they hold ``:``: :class:`ArchiveIds`)."""
        return "" if self.primary else f"{self.name}{ID_SEPARATOR}"

    @property
    def ids(self) -> ArchiveIds:
        return ArchiveIds.of(self.name, self.id_prefix)

    def archive_id(self, source_id: str) -> str:
        return self.ids.archive_id(source_id)


@dataclass(frozen=True)
class ArchiveIds:
    """How one profile's source session ids become the archive's (see the module).

    ``prefix`` is ``<profile>:``; ``primary``: the first home's root, whose ids are
    kept unless they hold ``:``. Injective across profiles: an archive id without
    ``:`` can only be the primary's, and one with ``:`` starts with its own profile's
    name (no profile name holds ``:``, and no two profiles share a name).
    """

    prefix: str
    primary: bool = False

    @classmethod
    def of(cls, profile: str, id_prefix: str = "") -> ArchiveIds:
        """The rule for ``profile`` given its :attr:`Profile.id_prefix` ("": the primary)."""
        return cls(id_prefix or f"{profile}{ID_SEPARATOR}", primary=not id_prefix)

    @classmethod
    def of_home(
        cls, home_root: str | Path, profile: str | None = None, id_prefix: str = ""
    ) -> ArchiveIds:
        """The rule for the home folder ``home_root``: archived under ``profile``, else
        the profile the folder is (``profiles/<name>`` gives name, anything else default)."""
        return cls.of(profile or profile_of(home_root), id_prefix)

    def archive_id(self, source_id: str) -> str:
        if self.primary and ID_SEPARATOR not in source_id:
            return source_id
        return f"{self.prefix}{source_id}"

    def source_id(self, archive_id: str) -> str:
        """The source's own id of one of this profile's archive ids."""
        if self.primary and ID_SEPARATOR not in archive_id:
            return archive_id
        return archive_id.removeprefix(self.prefix)

    def sql(self, expr: str) -> str:
        """SQL naming the archive id of the source id ``expr`` (NULL stays NULL)."""
        prefix = "'" + self.prefix.replace("'", "''") + "'"
        if not self.primary:
            return f"{prefix} || {expr}"
        return (
            f"CASE WHEN instr({expr}, '{ID_SEPARATOR}') > 0 THEN {prefix} || {expr} ELSE {expr} END"
        )


def discover(homes: Sequence[HermesHome]) -> list[Profile]:
    """Every profile of ``homes``, the first home's root first (``default``, usually)."""
    found: list[Profile] = []
    taken: set[str] = set()

    def add(name: str, home: HermesHome, primary: bool = False) -> None:
        base = _clean(name)
        name, n = base, 1
        while name in taken:
            n += 1
            name = f"{base}-{n}"
        taken.add(name)
        found.append(Profile(name, home, primary))

    seen: set[Path] = set()
    for i, home in enumerate(homes):
        root = home.root.expanduser().resolve()
        if root in seen:
            continue
        seen.add(root)
        prefix = "" if i == 0 else f"{_clean(root.name)}-"
        # The first home is named as the importer always named it: ``default``, or the
        # profile's own name when the home given is a ``profiles/<name>`` folder.
        add(profile_of(root) if i == 0 else _clean(root.name), home, primary=i == 0)
        for name, profile_home in home.profiles().items():
            add(f"{prefix}{name}", profile_home)
    return found


def _clean(name: str) -> str:
    """A folder name as a profile name: other characters become ``-``."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "home"
    if not cleaned[0].isalnum():
        cleaned = f"p{cleaned}"
    cleaned = cleaned[:64]
    return f"{cleaned}-home" if cleaned == ALL else cleaned


@dataclass(frozen=True)
class Scope:
    """The profiles one request reads: ``names`` (None: every profile, no restriction)."""

    names: frozenset[str] | None = None

    @property
    def everything(self) -> bool:
        return self.names is None

    def spans(self, profiles: Collection[object]) -> bool:
        """Whether answers in this scope mix profiles: it reads 2+ of ``profiles`` (those
        served). Pages then name each row's profile and count by profile."""
        return len(profiles if self.names is None else self.names) > 1

    @property
    def label(self) -> str:
        """``all`` or the one profile's name (what ``?profile=`` says)."""
        if self.names is None:
            return ALL
        return ",".join(sorted(self.names))

    @classmethod
    def of(cls, names: Iterable[str] | None) -> Scope:
        return cls(None if names is None else frozenset(names))


EVERY_PROFILE = Scope()  # no restriction: what the CLI and a one-profile home read


def parse_profile(
    value: str | None, profiles: Sequence[Profile], *, only: str | None = None
) -> str | None:
    """``?profile=`` / ``--profile`` checked against the profiles served.

    Returns the profile's name, ``all``, or None when the value is empty. A name
    that is not served is a ValidationError, saying which are (none but ``only``
    when Recall serves one profile).
    """
    if value is None or not value.strip():
        return None
    value = value.strip()
    names = [p.name for p in profiles]
    if only is not None:
        if value in (only, ALL):
            return only
        raise ValidationError(f"This Recall serves the profile {only!r} only.")
    if value == ALL or value in names:
        return value
    raise ValidationError(
        f"There is no profile called {value[:64]!r}; the profiles are: {', '.join(names)}."
    )


def by_name(profiles: Sequence[Profile], name: str) -> Profile:
    for p in profiles:
        if p.name == name:
            return p
    raise KeyError(name)
