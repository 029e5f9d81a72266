"""Turn what a person types into FTS5 MATCH strings and scan SQL.

This is the one module that builds MATCH expressions. Input is read with FTS5's own
syntax (words, ``"phrases"``, ``AND``/``OR``/``NOT``, ``prefix*``, ``NEAR(a b, 5)``,
parentheses), repaired where it is broken, and parsed into a small tree. Every output
is generated from that tree with each term double-quoted, so nothing a person types
ever reaches FTS5 as syntax.

Precedence is NOT > AND > OR, and a bare word list is an AND. (FTS5 itself binds an
implicit AND tighter than NOT, which surprises people: ``docker NOT compose swarm``
here means "docker and swarm, without compose".) Generated expressions use explicit
operators and parentheses, so FTS5 reads them exactly as the tree says.

``ParsedQuery.display`` is a canonical form of the tree in FTS5 syntax: plain words
bare, anything else quoted, implicit AND as a space between terms, explicit ``AND``
next to a group or an exclusion, NEAR always with its distance. It is a valid FTS5
expression that matches the same rows as ``fts_match("unicode61")``.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

from dashboard.errors import QuerySyntaxError
from dashboard.search.lexing import (
    EOF,
    OPERATORS,
    QUOTES,
    Token,
    balance,
    cut_at_word,
    lex,
    mark_near,
    remove_invisible,
)
from dashboard.text import CJK

NOTHING_TO_SEARCH = "Nothing to search for: the query has only operators or punctuation."
ONLY_EXCLUSIONS = "A query needs at least one term to look for; NOT only excludes."

NEAR_DEFAULT = 10  # FTS5's own default distance
NEAR_MAX = 1000  # far beyond any message; keeps a typo like 10000000000 out of FTS5
TRIGRAM_MIN = 3  # a trigram index finds 0 rows (without error) for shorter strings

KEYWORDS = {*OPERATORS, "NEAR"}
# SQLite's lower() folds ASCII only; folding more in Python would miss "Ärger".
ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


@dataclass(frozen=True)
class Term:
    """One thing to look for, as literal text (no quotes, no operators)."""

    text: str
    kind: Literal["word", "phrase", "prefix"]

    @property
    def cjk(self) -> bool:
        """Contains a CJK ideograph, kana or hangul."""
        return CJK.search(self.text) is not None

    @property
    def short_cjk(self) -> bool:
        """A CJK term a trigram index cannot find: under 3 characters in all.

        "部署" needs a scan; "docker部署" is long enough for trigram although its CJK
        run is two characters, and unicode61 could not find either inside a sentence.
        """
        return self.cjk and len(self.text) < TRIGRAM_MIN

    @property
    def has_symbols(self) -> bool:
        """Holds a character the word index drops: ``C++``, ``c#``, ``.NET``, ``node.js``.

        unicode61 keeps letters and digits only, so ``"C++"`` there means the word
        "c" (and ``"node.js"`` the words "node js"). Such a term has to be matched
        as literal text: trigram for 3+ characters, else a scan.
        """
        return any(not (ch.isalnum() or ch.isspace()) for ch in self.text)

    @property
    def symbols_at_edge(self) -> bool:
        """A symbol not between two letters or digits: ``C++``, ``c#``, ``.NET``, ``--force``.

        The word index loses such a term entirely ("c", "net"). Symbols inside a word
        (``node.js``, ``pg_stat_activity``) only separate its words there, so the word
        index still finds every candidate and a literal check can keep the right ones.
        """
        text = self.text
        return any(
            not (ch.isalnum() or ch.isspace())
            and not (0 < i < len(text) - 1 and text[i - 1].isalnum() and text[i + 1].isalnum())
            for i, ch in enumerate(text)
        )


@dataclass(frozen=True)
class _Near:
    terms: tuple[Term, ...]
    distance: int


@dataclass(frozen=True)
class _And:
    children: tuple[_Node, ...]


@dataclass(frozen=True)
class _Or:
    children: tuple[_Node, ...]


@dataclass(frozen=True)
class _Not:
    left: _Node
    right: _Node


_Node = Term | _Near | _And | _Or | _Not


@dataclass(frozen=True)
class ParsedQuery:
    """A repaired, parsed search query; blank input gives an ``empty`` one."""

    raw: str
    display: str
    repairs: tuple[str, ...]
    positive: tuple[Term, ...]
    negative: tuple[Term, ...]
    _tree: _Node | None = field(default=None, repr=False, compare=False)

    @property
    def empty(self) -> bool:
        """Nothing to search for (blank input)."""
        return self._tree is None

    def fts_match(self, tokenizer: Literal["unicode61", "trigram"]) -> str | None:
        """The MATCH expression for an index with this tokenizer.

        None when that index cannot answer: the query is empty, or (trigram) a term is
        shorter than 3 characters, which would silently match nothing. For trigram,
        NEAR becomes AND and ``x*`` the substring ``x``.
        """
        if tokenizer not in ("unicode61", "trigram"):
            raise ValueError(f"unknown FTS5 tokenizer: {tokenizer!r}")
        if self._tree is None:
            return None
        if tokenizer == "trigram":
            if any(len(t.text) < TRIGRAM_MIN for t in _terms(self._tree)):
                return None
            return _render(self._tree, _quote_substring, near=False, juxtapose=False)
        return _render(self._tree, _quote, near=True, juxtapose=False)

    def scan_sql(self, columns: Sequence[str]) -> tuple[str, list[str]]:
        """A SQL condition finding the query as substrings of any of ``columns``.

        Args:
            columns: trusted SQL column expressions, e.g. ``["m.content", "m.tool_name"]``.

        Returns ``(sql, params)``: every term is a parameter, ASCII-lowercased to match
        SQLite's ``lower()``. ``instr`` (unlike ``LIKE``) reads past a NUL, so the
        ``"\\x00json:"`` contents are searched too. NEAR becomes AND, ``x*`` a substring.
        """
        if self._tree is None:
            raise ValueError("an empty query has no scan condition; check .empty first")
        if not columns:
            raise ValueError("scan_sql needs at least one column")
        params: list[str] = []
        return _scan(self._tree, _instr_found(list(columns)), params), params

    def name_sql(self, title: str, session_id: str) -> tuple[str, list[str]]:
        """A SQL condition: the query, read as a whole, holds for a session's name.

        A term is found in the name when the title contains it (ASCII case folded,
        as LIKE does) or it is exactly the session id. NOT, OR and AND mean what they
        mean for messages, so ``docker NOT compose`` never name-matches "Docker
        compose: …". ``title`` and ``session_id`` are trusted SQL column expressions.
        """
        if self._tree is None:
            raise ValueError("an empty query has no name condition; check .empty first")

        def found(term: Term, params: list[str]) -> str:
            params.extend(["%" + _like_escape(term.text) + "%", term.text])
            return f"(coalesce({title}, '') LIKE ? ESCAPE '!' OR {session_id} = ?)"

        params: list[str] = []
        return _scan(self._tree, found, params), params

    def required_terms(self) -> tuple[Term, ...]:
        """Terms every matching row contains (both sides of an AND, a NEAR's terms, the
        left of a NOT; an OR only those all its branches require)."""
        return tuple(_required(self._tree)) if self._tree is not None else ()

    def highlight_terms(self) -> list[str]:
        """Texts to mark in results: positive terms, longest first, no case duplicates."""
        seen: dict[str, str] = {}
        for term in self.positive:
            seen.setdefault(term.text.casefold(), term.text)
        return sorted(seen.values(), key=len, reverse=True)


def parse_query(text: str, *, max_chars: int = 500, max_terms: int = 32) -> ParsedQuery:
    """Parse and repair a search query typed by a person.

    Args:
        text: the query as typed.
        max_chars: longer input is cut at a word boundary.
        max_terms: terms after this many are ignored.

    Raises QuerySyntaxError when nothing searchable remains (only operators or
    punctuation, or only NOT terms). Every repair made is described in ``repairs``.
    """
    raw = text.strip()
    notes: list[str] = []
    clean = remove_invisible(raw, notes).translate(QUOTES).strip()
    if len(clean) > max_chars:
        clean = cut_at_word(clean, max_chars)
        notes.append(f"Shortened the query to its first {max_chars} characters.")
    if not clean:
        return ParsedQuery(raw, "", _unique(notes), (), ())
    tokens = mark_near(balance(lex(clean, notes), notes))
    parser = _Parser(tokens, max_terms, notes)
    tree = parser.parse()
    if parser.cut:
        notes.append(f"Searched the first {max_terms} terms; ignored the rest.")
    if tree is None:
        raise QuerySyntaxError(NOTHING_TO_SEARCH)
    positive, negative = _polarised(tree)
    return ParsedQuery(
        raw=raw,
        display=_render(tree, _quote_display, near=True, juxtapose=True),
        repairs=_unique(notes),
        positive=positive,
        negative=negative,
        _tree=tree,
    )


# --- cleaning and lexing -------------------------------------------------------------


# --- parsing ---------------------------------------------------------------------------


class _Parser:
    """Recursive descent over the tokens, repairing as it goes (notes say how)."""

    def __init__(self, tokens: list[Token], max_terms: int, notes: list[str]) -> None:
        self.tokens, self.pos, self.notes = tokens, 0, notes
        self.budget = max_terms
        self.depth = 0
        self.cut = False  # terms past max_terms were ignored
        self.lost_exclusion = False

    def parse(self) -> _Node | None:
        node, exclusions = self._or()
        if node is None and (exclusions or self.lost_exclusion):
            raise QuerySyntaxError(ONLY_EXCLUSIONS)
        return node

    def _peek(self) -> Token:
        while self.pos < len(self.tokens):
            tok = self.tokens[self.pos]
            if self.budget > 0 or tok.kind in (")", ","):
                return tok
            if tok.kind == "term" and self.pos and self.tokens[self.pos - 1].kind == ",":
                return tok  # possibly a NEAR distance, not a term
            # Past max_terms: skip all but what closes groups, so the tree stays whole.
            self.cut = self.cut or tok.kind == "term"
            self.pos += 1
        return EOF

    def _or(self) -> tuple[_Node | None, list[_Node]]:
        groups = [self._and()]
        while self._peek().kind == "OR":
            self.pos += 1
            groups.append(self._and())
        if len(groups) == 1:
            return groups[0]
        nodes = []
        for node, exclusions in groups:
            if node is not None:
                nodes.append(node)
            elif exclusions:
                self.lost_exclusion = True
                shown = " ".join(f"NOT {_display(e)}" for e in exclusions)
                self.notes.append(f"Dropped {shown}: beside OR it has nothing to exclude from.")
            else:
                self.notes.append("Removed a dangling OR.")
        return (_join(_Or, nodes) if nodes else None), []

    def _and(self) -> tuple[_Node | None, list[_Node]]:
        """Terms joined by AND; exclusions apply to all of them, wherever written."""
        items: list[_Node] = []
        exclusions: list[_Node] = []
        leading: list[_Node] = []  # NOT x written before any term
        waiting = False  # an AND still waiting for its right operand
        while True:
            tok = self._peek()
            if tok.kind in ("EOF", "OR") or (tok.kind == ")" and self.depth):
                break
            if tok.kind in (")", ","):  # a comma outside NEAR separates, like a space
                self.pos += 1
            elif tok.kind == "AND":
                self.pos += 1
                if waiting or not (items or exclusions):
                    self.notes.append("Removed a dangling AND.")
                waiting = True
            elif tok.kind == "NOT":
                self.pos += 1
                target, _ = self._unit()
                if target is None:
                    self.notes.append("Removed a dangling NOT.")
                    continue
                exclusions.append(target)
                if not items:
                    leading.append(target)
                waiting = False
            else:
                node, inner = self._unit()
                # (b NOT c) inside an AND excludes c from the whole AND: hoist it, so
                # the tree (and display) has one canonical form.
                hoisted = []
                while isinstance(node, _Not):
                    hoisted.append(node.right)
                    node = node.left
                exclusions.extend(inner + hoisted[::-1])
                if node is not None:
                    items.append(node)
                waiting = False
        if waiting:
            self.notes.append("Removed a dangling AND.")
        if not items:
            return None, exclusions
        for target in leading:
            self.notes.append(f"Moved NOT {_display(target)} after the terms it excludes from.")
        node = _join(_And, items)
        for target in exclusions:
            node = _Not(node, target)
        return node, []

    def _unit(self) -> tuple[_Node | None, list[_Node]]:
        """A term, NEAR group or parenthesised group; (None, []) if none starts here."""
        kind = self._peek().kind
        if kind == "term":
            return self._term(), []
        if kind == "NEAR":
            return self._near(), []
        if kind == "(":
            self.pos += 1
            self.depth += 1
            node, exclusions = self._or()
            self.depth -= 1
            if self._peek().kind == ")":
                self.pos += 1
            if node is None and not exclusions and not self.cut:
                self.notes.append("Removed empty parentheses.")
            return node, exclusions
        return None, []

    def _term(self) -> Term | None:
        tok = self.tokens[self.pos]
        self.pos += 1
        if self.budget <= 0:
            self.cut = True
            return None
        self.budget -= 1
        return Term(tok.text, "prefix" if tok.prefix else "phrase" if tok.phrase else "word")

    def _near(self) -> _Node | None:
        self.pos += 2  # NEAR (
        terms: list[Term] = []
        distance: int | None = None
        after_comma, stray, nested = False, False, 0
        while (tok := self._peek()).kind != "EOF":
            if tok.kind == "term" and not (after_comma and distance is None):
                term = self._term()
                if term is not None:
                    terms.append(term)
                continue
            self.pos += 1
            if tok.kind == ")" and not nested:
                break
            if tok.kind == ",":
                after_comma = True
            elif tok.kind == "term":
                plain = tok.text.isascii() and tok.text.isdigit()
                distance = int(tok.text) if plain and not (tok.phrase or tok.prefix) else -1
            else:  # operators and parentheses have no meaning inside NEAR
                stray = True
                nested += {"(": 1, ")": -1}.get(tok.kind, 0)
        if stray:
            self.notes.append("Ignored operators and parentheses inside NEAR(...).")
        if after_comma and (distance is None or not 0 <= distance <= NEAR_MAX):
            self.notes.append(
                f"A NEAR distance is a whole number from 0 to {NEAR_MAX}; used {NEAR_DEFAULT}."
            )
            distance = None
        if len(terms) < 2:
            if not terms and not self.cut:
                self.notes.append("Removed an empty NEAR().")
            return terms[0] if terms else None
        return _Near(tuple(terms), NEAR_DEFAULT if distance is None else distance)


def _join(cls: type[_And] | type[_Or], nodes: list[_Node]) -> _Node:
    """One AND/OR node over ``nodes``: nested ones of the same kind flattened, repeats dropped."""
    flat: dict[object, _Node] = {}
    for node in nodes:
        for child in node.children if isinstance(node, cls) else (node,):
            flat.setdefault(_same(child) if isinstance(child, Term) else child, child)
    children = tuple(flat.values())
    return children[0] if len(children) == 1 else cls(children)


# --- walking and rendering -----------------------------------------------------------


def _same(term: Term) -> tuple[str, bool]:
    # Every output quotes words as phrases and ignores case, so "Docker" and "docker"
    # (a word or a phrase) find the same rows; only a prefix differs.
    return term.text.lower(), term.kind == "prefix"


def _walk(node: _Node) -> Iterator[_Node]:
    yield node
    if isinstance(node, _And | _Or):
        for child in node.children:
            yield from _walk(child)
    elif isinstance(node, _Not):
        yield from _walk(node.left)
        yield from _walk(node.right)
    elif isinstance(node, _Near):
        yield from node.terms


def _required(node: _Node) -> list[Term]:
    if isinstance(node, Term):
        return [node]
    if isinstance(node, _Near):
        return list(node.terms)
    if isinstance(node, _Not):
        return _required(node.left)
    if isinstance(node, _And):
        return [t for child in node.children for t in _required(child)]
    branches = [{_same(t): t for t in _required(child)} for child in node.children]
    common = set(branches[0]).intersection(*branches[1:])
    return [term for key, term in branches[0].items() if key in common]


def _terms(node: _Node) -> list[Term]:
    return [n for n in _walk(node) if isinstance(n, Term)]


def _polarised(tree: _Node) -> tuple[tuple[Term, ...], tuple[Term, ...]]:
    """Terms outside any NOT's right side, and terms inside one; each deduplicated."""
    negative_nodes = [n.right for n in _walk(tree) if isinstance(n, _Not)]
    negative = {id(t) for side in negative_nodes for t in _terms(side)}
    pos: dict[tuple[str, str], Term] = {}
    neg: dict[tuple[str, str], Term] = {}
    for term in _terms(tree):
        bucket = neg if id(term) in negative else pos
        bucket.setdefault(_same(term), term)
    return tuple(pos.values()), tuple(neg.values())


def _quote(term: Term) -> str:
    return '"' + term.text.replace('"', '""') + '"' + ("*" if term.kind == "prefix" else "")


def _quote_substring(term: Term) -> str:
    # A trigram index matches any substring of 3+ characters: a prefix is a substring.
    return '"' + term.text.replace('"', '""') + '"'


def _quote_display(term: Term) -> str:
    bare = (
        term.kind != "phrase"
        and term.text not in KEYWORDS
        and all(ch.isalnum() or ch == "_" for ch in term.text)
    )
    return term.text + ("*" if term.kind == "prefix" else "") if bare else _quote(term)


def _display(node: _Node) -> str:
    return _render(node, _quote_display, near=True, juxtapose=True)


def _render(node: _Node, quote: Callable[[Term], str], *, near: bool, juxtapose: bool) -> str:
    """FTS5 text for ``node``; ``near=False`` writes NEAR as AND (trigram).

    ``juxtapose`` writes an AND of plain terms as ``a b``. FTS5 only accepts that form
    between terms and NEAR groups, and binds it tighter than NOT, so anything else
    gets an explicit AND.
    """

    def go(n: _Node, parens_below: int) -> str:
        text, level = one(n)
        return f"({text})" if level < parens_below else text

    def one(n: _Node) -> tuple[str, int]:  # text and precedence: OR 1, AND 2, NOT 3, atom 4
        if isinstance(n, Term):
            return quote(n), 4
        if isinstance(n, _Near):
            if not near:
                return " AND ".join(quote(t) for t in n.terms), 2
            return f"NEAR({' '.join(quote(t) for t in n.terms)}, {n.distance})", 4
        if isinstance(n, _Or):
            return " OR ".join(go(c, 2) for c in n.children), 1
        if isinstance(n, _And):
            atoms = juxtapose and all(isinstance(c, Term | _Near) for c in n.children)
            return (" " if atoms else " AND ").join(go(c, 3) for c in n.children), 2
        # The left side may be an AND: a set difference does not care how it groups.
        return f"{go(n.left, 2)} NOT {go(n.right, 4)}", 3

    return one(node)[0]


_Found = Callable[[Term, list[str]], str]  # SQL for "this term is found", adding its params


def _instr_found(columns: list[str]) -> _Found:
    def found(term: Term, params: list[str]) -> str:
        params.extend([term.text.translate(ASCII_LOWER)] * len(columns))
        if any(ch.isascii() and ch.isalpha() for ch in term.text):
            tests = [f"instr(lower(coalesce({col}, '')), ?) > 0" for col in columns]
        else:
            # Nothing to fold (CJK, digits): skip lower(), which copies every row's text.
            tests = [f"instr({col}, ?) > 0" for col in columns]
        return "(" + " OR ".join(tests) + ")"

    return found


def _scan(node: _Node, found: _Found, params: list[str]) -> str:
    """SQL for the tree, each term tested by ``found``; NEAR becomes AND."""
    if isinstance(node, Term):
        return found(node, params)
    if isinstance(node, _Near):
        node = _And(node.terms)
    if isinstance(node, _Not):
        left = _scan(node.left, found, params)
        return f"({left} AND NOT {_scan(node.right, found, params)})"
    joiner = " OR " if isinstance(node, _Or) else " AND "
    return "(" + joiner.join(_scan(c, found, params) for c in node.children) + ")"


def _like_escape(text: str) -> str:
    return text.replace("!", "!!").replace("%", "!%").replace("_", "!_")


def _unique(notes: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(notes))


# -- a message as a query ---------------------------------------------------------------


def usable_query(text: str) -> ParsedQuery | None:
    """The parsed query, or None when there is nothing in it to search for or mark."""
    try:
        parsed = parse_query(text)
    except QuerySyntaxError:
        return None
    return None if parsed.empty else parsed


def highlight_terms(q: str) -> list[str]:
    """The terms search matched for ``q`` (NOT terms excluded); none if ``q`` is unusable."""
    try:
        return parse_query(q).highlight_terms()
    except QuerySyntaxError:
        return []
