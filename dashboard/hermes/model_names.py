"""One model under its many spellings.

Hermes records the model as each provider names it: ``anthropic/claude-sonnet-4.5``
through OpenRouter, ``claude-sonnet-4-5`` from Anthropic directly, sometimes with a
release date. Search's model facet and filter and the overview's top models group
spellings with :func:`model_family`.
"""

from __future__ import annotations

import re

_DATE_SUFFIX = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2})$")


def model_family(name: str) -> str:
    """The key every spelling of one model shares; the filter matches by it.

    ``anthropic/claude-sonnet-4.5``, ``claude-sonnet-4-5`` and
    ``claude-sonnet-4-5-20250929`` are one model: the provider prefix, case, the
    choice of ``.``/``_``/``-`` between version parts and a release-date suffix go.
    """
    base = name.strip().rsplit("/", 1)[-1].casefold()
    base = re.sub(r"[._\s]+", "-", base)
    return _DATE_SUFFIX.sub("", base) or name.strip()
