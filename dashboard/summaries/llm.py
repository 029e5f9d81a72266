"""The summarizer: stage 2 of session search, an OpenAI-compatible chat call per session.

One shared ``httpx.Client`` and one semaphore per app: however many browser
requests arrive, at most ``concurrency`` calls are in flight (default 3, max 5,
as in the seed's ``_summarize_all``). Timeouts and 5xx answers are retried with
jittered exponential backoff; anything else unusable becomes a
:class:`SummaryFailed` with a reason a person can read. The API key is sent as a
bearer token and never appears in a message, a log line or a repr.
"""

from __future__ import annotations

import math
import random
import threading
import time
from dataclasses import dataclass, field

import httpx

# The seed's recap prompt (first seed article, section 五).
SYSTEM_PROMPT = """You are reviewing a past conversation transcript to help recall what happened.
Summarize the conversation with a focus on the search topic. Include:
1. What the user asked about or wanted to accomplish
2. What actions were taken and what the outcomes were
3. Key decisions, solutions found, or conclusions reached
4. Any specific commands, files, URLs, or technical details that were important
5. Anything left unresolved or notable

Be thorough but concise. Preserve specific details (commands, paths, error messages).
Write in past tense as a factual recap."""

DEFAULT_CONCURRENCY = 3
MAX_CONCURRENCY = 5
BACKOFF_BASE_S = 0.5


@dataclass(frozen=True)
class LLMConfig:
    """Where and how to ask for summaries; ``base_url`` None means "not configured"."""

    base_url: str | None = None
    model: str = "gpt-4o-mini"
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 30.0
    retries: int = 1
    concurrency: int = DEFAULT_CONCURRENCY
    temperature: float = 0.1
    max_tokens: int = 1200

    @property
    def enabled(self) -> bool:
        return bool(self.base_url)

    @classmethod
    def from_mapping(cls, config: dict) -> LLMConfig:
        """Build from app config keys ``LLM_BASE_URL``, ``LLM_MODEL``, ``LLM_API_KEY``…"""

        def number(key: str, default: float) -> float:
            # A setting that is not a finite number of 0 or more ("inf", "nan", "-1", "²")
            # falls back to the default rather than failing at start.
            value = config.get(key)
            try:
                found = float(value) if value not in (None, "") else default
            except (TypeError, ValueError):
                return default
            return found if math.isfinite(found) and found >= 0 else default

        concurrency = int(number("SUMMARY_CONCURRENCY", DEFAULT_CONCURRENCY))
        return cls(
            base_url=(config.get("LLM_BASE_URL") or None),
            model=config.get("LLM_MODEL") or cls.model,
            api_key=config.get("LLM_API_KEY") or None,
            timeout_s=number("LLM_TIMEOUT", cls.timeout_s),
            retries=int(number("LLM_RETRIES", cls.retries)),
            concurrency=max(1, min(MAX_CONCURRENCY, concurrency)),
        )


class SummaryFailed(Exception):
    """No usable summary: the reason is shown with the extractive preview."""


class Summarizer:
    """Asks an OpenAI-compatible ``/chat/completions`` endpoint for session recaps."""

    def __init__(self, config: LLMConfig, *, transport: httpx.BaseTransport | None = None) -> None:
        self.config = config
        self._slots = threading.BoundedSemaphore(config.concurrency)
        self._client = httpx.Client(
            base_url=(config.base_url or "http://127.0.0.1").rstrip("/") + "/",
            timeout=httpx.Timeout(config.timeout_s, connect=min(5.0, config.timeout_s)),
            transport=transport,
            headers={"Authorization": f"Bearer {config.api_key}"} if config.api_key else {},
        )

    def close(self) -> None:
        self._client.close()

    def summarize(self, transcript: str, query: str, *, source: str, when: str) -> str:
        """Recap ``transcript`` around ``query``; raise SummaryFailed with a reason."""
        return self.ask(SYSTEM_PROMPT, user_prompt(transcript, query, source, when))

    def ask(self, system: str, user: str) -> str:
        """One chat completion (``system`` then ``user``) through the app's client and
        semaphore; raise SummaryFailed with a reason."""
        if not self.config.enabled:
            raise SummaryFailed("no summarization endpoint is configured")
        body = {
            "model": self.config.model,
            "temperature": self.config.temperature,
            "max_tokens": self.config.max_tokens,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
        }
        with self._slots:
            return self._post_with_retries(body)

    def _post_with_retries(self, body: dict) -> str:
        last = "no answer"
        for attempt in range(self.config.retries + 1):
            if attempt:
                # Jittered exponential backoff: several cards retrying together must
                # not hit a struggling local model in lockstep.
                time.sleep(BACKOFF_BASE_S * 2 ** (attempt - 1) * random.uniform(0.5, 1.5))
            try:
                response = self._client.post("chat/completions", json=body)
            except httpx.TimeoutException:
                last = f"the model did not answer within {self.config.timeout_s:g} s"
                continue
            except httpx.TransportError as exc:
                raise SummaryFailed(
                    f"cannot reach the summarization endpoint ({type(exc).__name__})"
                ) from exc
            if response.status_code >= 500:
                last = f"the endpoint answered HTTP {response.status_code}"
                continue
            if response.status_code >= 400:
                raise SummaryFailed(
                    f"the endpoint refused the request (HTTP {response.status_code})"
                )
            return _reply_text(response)
        raise SummaryFailed(last)


def user_prompt(transcript: str, query: str, source: str, when: str) -> str:
    """The seed tool's user message: topic, source and date, then the transcript."""
    return (
        f"Search topic: {query}\n"
        f"Session source: {source}\n"
        f"Session date: {when}\n\n"
        f"CONVERSATION TRANSCRIPT:\n{transcript}\n\n"
        f"Summarize this conversation with focus on: {query}"
    )


def _reply_text(response: httpx.Response) -> str:
    try:
        data = response.json()
        text = data["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise SummaryFailed("the endpoint's reply was not a chat completion") from exc
    if not isinstance(text, str) or not text.strip():
        raise SummaryFailed("the model returned an empty reply")
    return text.strip()
