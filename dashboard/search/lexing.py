"""Read typed text as query tokens: invisible characters, quotes, words, balanced parentheses."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

MAX_DEPTH = 8  # deeper parentheses are flattened: bounds recursion on junk input

OPERATORS = ("AND", "OR", "NOT")

# Curly quotes from phone and word-processor keyboards are meant as quotes.
QUOTES = str.maketrans({"\u201c": '"', "\u201d": '"', "\uff02": '"'})

# CJK sentence punctuation separates words, as it does for the unicode61 tokenizer.
_CJK_PUNCTUATION = "\uff0c\u3002\uff1b\uff1a\uff01\uff1f\u3001"

_SENTENCE_END = ".,;:!?"  # dropped from a word's end: "refused?" searches "refused"


def remove_invisible(text: str, notes: list[str]) -> str:
    # NUL ends a MATCH string early ("unterminated string"), a lone surrogate cannot be
    # encoded, and zero-width characters split words invisibly.
    kept = "".join(
        ch for ch in text if ch in "\t\n\r" or unicodedata.category(ch) not in ("Cc", "Cf", "Cs")
    )
    if len(kept) != len(text):
        notes.append("Removed invisible control characters.")
    return kept


def cut_at_word(text: str, limit: int) -> str:
    head = text[:limit]
    if not text[limit].isspace():
        boundary = re.search(r"\s\S*$", head)
        if boundary and boundary.start() > 0:
            head = head[: boundary.start()]
    return head.rstrip()


@dataclass
class Token:
    kind: str  # "term", "AND", "OR", "NOT", "NEAR", "(", ")", ",", "EOF"
    text: str = ""
    phrase: bool = False
    prefix: bool = False


EOF = Token("EOF")


def lex(text: str, notes: list[str]) -> list[Token]:
    tokens: list[Token] = []
    ignored: list[str] = []
    quoted: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace() or ch in _CJK_PUNCTUATION:
            i += 1
        elif ch in "()":
            tokens.append(Token(ch))
            i += 1
        elif _excludes(text, i):
            tokens.append(Token("NOT"))  # "-compose", as every search box reads it
            i += 1
        elif ch == '"':
            i, body = _read_string(text, i + 1, notes)
            prefix = text.startswith("*", i)
            while text.startswith("*", i):
                i += 1
            phrase = " ".join(body.split())
            if searchable(phrase):
                tokens.append(Token("term", phrase, phrase=True, prefix=prefix))
            else:
                ignored.append(f'"{body}"' + "*" * prefix)
        else:
            j = i
            while j < n and not (text[j].isspace() or text[j] in '"()' + _CJK_PUNCTUATION):
                j += 1
            tokens.extend(_lex_chunk(text[i:j], ignored, quoted))
            i = j
    if quoted:
        words = ", ".join(quoted[:3]) + (", …" if len(quoted) > 3 else "")
        notes.append(f"Searched {words} as text: punctuation in a word is not query syntax.")
    if ignored:
        items = ", ".join(ignored[:3]) + (", …" if len(ignored) > 3 else "")
        notes.append(f"Ignored {items}: no letters or digits to search for.")
    return tokens


def _excludes(text: str, i: int) -> bool:
    """Whether the ``-`` at ``i`` starts an exclusion: ``-word``, ``-"a phrase"``, ``-(a b)``.

    Only at the start of a word and before a letter, a quote or a parenthesis: a
    dash inside ``my-app.config.ts``, a lone ``-``, ``--force`` and ``-1`` stay text.
    """
    if text[i] != "-" or i + 1 >= len(text):
        return False
    if i and not (text[i - 1].isspace() or text[i - 1] == "("):
        return False
    after = text[i + 1]
    return after in '"(' or unicodedata.category(after)[0] == "L"


def _read_string(text: str, i: int, notes: list[str]) -> tuple[int, str]:
    """Read an FTS5 string body from just after its opening quote (``""`` is a quote)."""
    body: list[str] = []
    while i < len(text):
        if text[i] == '"':
            if not text.startswith('""', i):
                return i + 1, "".join(body)
            i += 1
        body.append(text[i])
        i += 1
    notes.append("Closed an unbalanced quote.")
    return i, "".join(body)


def _lex_chunk(chunk: str, ignored: list[str], quoted: list[str]) -> list[Token]:
    # A comma at a word's edge separates (NEAR's distance); inside ("1,000") it is text.
    core = chunk.lstrip(",")
    tokens = [Token(",")] * (len(chunk) - len(core))
    word = core.rstrip(_SENTENCE_END)
    tail = core[len(word) :]
    prefix = word.endswith("*")
    word = word.rstrip("*")
    if word in OPERATORS and not prefix:
        tokens.append(Token(word))
    elif searchable(word):
        if not all(ch.isalnum() or ch == "_" for ch in word):
            quoted.append(word)
        tokens.append(Token("term", word, prefix=prefix))
    elif core:
        ignored.append(core)
    if "," in tail:
        tokens.append(Token(","))
    return tokens


def searchable(text: str) -> bool:
    # unicode61 indexes letters and digits only; "***" or "🎉" alone would match nothing.
    return any(unicodedata.category(ch)[0] in "LN" for ch in text)


def balance(tokens: list[Token], notes: list[str]) -> list[Token]:
    """Drop unmatched ``)``, close unclosed ``(``, flatten nesting past MAX_DEPTH."""
    out: list[Token] = []
    stack: list[bool] = []  # per open "(": was it kept?
    dropped = 0
    for tok in tokens:
        if tok.kind == "(":
            keep = sum(stack) < MAX_DEPTH
            stack.append(keep)
            if keep:
                out.append(tok)
            else:
                notes.append(f"Flattened parentheses nested deeper than {MAX_DEPTH}.")
        elif tok.kind == ")":
            if not stack:
                dropped += 1
            elif stack.pop():
                out.append(tok)
        else:
            out.append(tok)
    if dropped:
        notes.append("Removed an unmatched closing parenthesis.")
    if any(stack):
        notes.append("Closed an unbalanced parenthesis.")
        out.extend(Token(")") for _ in range(sum(stack)))
    return out


def mark_near(tokens: list[Token]) -> list[Token]:
    # As in FTS5, NEAR is an operator only as NEAR( ... ); elsewhere it is a word.
    for tok, nxt in zip(tokens, tokens[1:], strict=False):
        if tok.kind == "term" and tok.text == "NEAR" and not tok.phrase and not tok.prefix:
            if nxt.kind == "(":
                tok.kind = "NEAR"
    return tokens
