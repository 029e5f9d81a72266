"""A free-text message as a query for related history: its telling terms, ORed."""

from __future__ import annotations

import re

from dashboard.search.query import ASCII_LOWER, CJK, TRIGRAM_MIN

# Words too common to say what a message is about (English; other languages keep all).
STOPWORDS = frozenset(
    """a about above after again all also am an and any are as at be because been before
    being below between both but by can could did do does doing done down during each few
    for from further get got had has have having he her here hers him his how i if in into
    is it its itself just let like me more most my no nor not now of off on once only or
    other our ours out over own please same she should so some such than that the their
    theirs them then there these they this those through to too under until up us very
    was we were what when where which while who whom why will with would you your yours
    yourself last time said say tell told know think want need make use using used one""".split()
)

_WORD = re.compile(r"\w+", re.UNICODE)

# Particles that split a run of Chinese into the phrases around them.
_CJK_BREAKS = re.compile("[的了是在我你他她它们吗呢吧啊和与及或就也都要会能说什么怎么这那哪有没]+")

_CJK_SPLIT = re.compile(f"({CJK.pattern}+)|((?:(?!{CJK.pattern})\\w)+)")

CJK_PIECE = 4  # a long run of Chinese is searched as pieces of this many characters


def terms_query(text: str, max_terms: int = 8) -> str:
    """A free-text message as a query for related history: its telling terms, ORed.

    A whole message ANDed together rarely matches anything; ORed terms ranked by
    bm25 find the sessions that share the most specific words. Words shorter than 3
    characters and stopwords are left out; runs of Chinese/Japanese/Korean are split
    at particles and cut into pieces long enough for the trigram index. The longest
    terms are kept (they say most); each is quoted, so nothing in the message is
    read as query syntax. Returns "" when nothing is left to search for.
    """
    terms: list[str] = []
    for chunk in _WORD.findall(text.translate(ASCII_LOWER)):
        for cjk, word in _CJK_SPLIT.findall(chunk):  # "redis缓存" is two words
            for run in _CJK_BREAKS.split(cjk) if cjk else ():
                if len(run) >= TRIGRAM_MIN:
                    step = CJK_PIECE if len(run) > CJK_PIECE + 2 else len(run)
                    terms += [run[i : i + step] for i in range(0, len(run), step)]
            if len(word) >= 3 and word not in STOPWORDS and not word.isdigit():
                terms.append(word)
    terms = [t for t in dict.fromkeys(terms) if len(t) >= TRIGRAM_MIN]
    keep = set(sorted(terms, key=len, reverse=True)[:max_terms])
    chosen = [t for t in terms if t in keep][:max_terms]
    return " OR ".join(f'"{t}"' for t in chosen)
