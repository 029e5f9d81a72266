"""The demo's scripted story: a preference the user states, then overturns (issue 29).

Three conversations at fixed ages before the demo's "now", so a new user meets every
memory feature on first run:

1. ~300 days before: the user describes the team's Python stack and asks the agent to
   remember it; the agent calls ``memory`` (add, target user) with the USER.md entry
   :data:`STACK_ENTRY` byte for byte, and Hermes answers with success (the memory page's
   provenance: "wrote it", linking this message);
2. ~40 days before: "I'm mostly writing Go now" and a FastAPI handler ported to Go's
   net/http, with no memory call (the background review staged the replace instead:
   :func:`stack_now`, demo/pending.py);
3. ~10 days before: Go 1.23 for every service, and how to lay out internal packages.

The story names no other subject of the demo's USER.md (editor, shell, timezone, …), so
those entries have no newer mention. The texts are a screenplay, not generator tables:
they live here, in the order they are said. :class:`dashboard.demo.plan.DemoPlanner`
places them among its sessions with a random stream of their own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

from dashboard.demo.corpus import Msg

DAY = 86_400.0

#: The USER.md entry the first conversation writes (demo/build.py's USER_ENTRIES holds it).
STACK_ENTRY = (
    "Stack: Python 3.12, FastAPI, Postgres 16, Redis 7, Docker Compose locally, "
    "Kubernetes (k3s) in production, Terraform for infra."
)
#: What the background review's staged replace matches in it (demo/pending.py).
STACK_OLD_TEXT = "Stack: Python 3.12"
#: The memory call's id in the first conversation's assistant message.
MEMORY_CALL_ID = "call_5f1c0e7a92b34d6e81a0c4d2"
#: How long before "now" the user says the services moved to Go (conversation 2).
GO_NEWS_DAYS = 40
#: How long before that message the move finished: the month it names.
MOVE_DAYS_BEFORE_NEWS = 7


def move_month(anchor: float) -> str:
    """The month the services left FastAPI: the one the user names on hearing it."""
    moved = anchor - (GO_NEWS_DAYS + MOVE_DAYS_BEFORE_NEWS) * DAY
    return datetime.fromtimestamp(moved, UTC).strftime("%B")


def stack_now(anchor: float) -> str:
    """The entry the background review stages in place of :data:`STACK_ENTRY`."""
    return (
        f"Stack: mostly Go 1.23 now (the services left FastAPI in {move_month(anchor)}); "
        "Python 3.12 for scripts. Postgres 16, Redis 7, Docker Compose locally, k3s in "
        "production, Terraform."
    )


def go_news(anchor: float) -> str:
    """The user's words overturning the stack (conversation 2's first message opens so)."""
    return (
        f"Heads-up: I'm mostly writing Go now. The services left FastAPI in "
        f"{move_month(anchor)}; Python is only for scripts these days."
    )


@dataclass(frozen=True)
class Scene:
    """One scripted conversation: when it starts (``days_before`` "now", at ``hour`` UTC),
    where, on which of the demo's models, and its turns (each: user, then replies)."""

    days_before: int
    hour: int
    source: str
    model: str  # a name of demo/pricing.MODELS
    title: str
    turns: tuple[tuple[Msg, ...], ...]


def scenes(anchor: float) -> tuple[Scene, ...]:
    """The story's conversations, oldest first."""
    return (
        Scene(300, 9, "cli", "anthropic/claude-sonnet-4.5", "Our backend stack", _python_turns()),
        Scene(
            GO_NEWS_DAYS,
            14,
            "cli",
            "claude-sonnet-4-5",
            "Port the shipment handler to net/http",
            _port_turns(anchor),
        ),
        Scene(
            10, 16, "telegram", "anthropic/claude-sonnet-4.5", "Go package layout", _layout_turns()
        ),
    )


def _user(text: str) -> Msg:
    return Msg("user", text)


def _reply(text: str) -> Msg:
    return Msg("assistant", text, finish_reason="stop")


def _memory_add() -> tuple[Msg, Msg]:
    """The assistant's ``memory`` call and Hermes's result, as Hermes stores them."""
    arguments = {"action": "add", "target": "user", "content": STACK_ENTRY}
    call = {
        "id": MEMORY_CALL_ID,
        "type": "function",
        "function": {"name": "memory", "arguments": json.dumps(arguments)},
    }
    used = 412 + len(STACK_ENTRY)  # the profile held a few entries before this one
    result = {"success": True, "message": "Added entry to USER.md", "usage": f"{used}/1375 chars"}
    return (
        Msg(
            "assistant",
            "Noted, saving that to your profile.",
            tool_calls=json.dumps([call]),
            finish_reason="tool_calls",
        ),
        Msg("tool", json.dumps(result), tool_call_id=MEMORY_CALL_ID, tool_name="memory"),
    )


# The handler of conversation 1's answer, which the user asks to port to Go in conversation 2.
_HANDLER = (
    '@app.get("/shipments/{shipment_id}")\n'
    "async def get_shipment(shipment_id: int, conn=Depends(get_conn)):\n"
    "    row = await conn.fetchrow(\n"
    '        "SELECT id, status, updated_at FROM shipments WHERE id = $1", shipment_id\n'
    "    )\n"
    "    if row is None:\n"
    '        raise HTTPException(status_code=404, detail="shipment not found")\n'
    '    return {"id": row["id"], "status": row["status"], '
    '"updated_at": row["updated_at"].isoformat()}\n'
)


def _python_turns() -> tuple[tuple[Msg, ...], ...]:
    return (
        (
            _user(
                "Some context before we start on anything: we're a Python shop. All the "
                "backend services are Python 3.12 on FastAPI, data lives in Postgres 16, "
                "Redis 7 does caching and the job queue. Locally everything runs under "
                "Docker Compose, production is Kubernetes (k3s), and the infra is Terraform. "
                "Please remember that so I don't have to repeat it every session."
            ),
            *_memory_add(),
            _reply(
                "Saved to your profile: Python 3.12 with FastAPI, Postgres 16, Redis 7, "
                "Docker Compose locally, k3s in production, Terraform for infra.\n\n"
                "From now on I'll assume that stack: FastAPI idioms, async drivers for "
                "Postgres and Redis, Compose files for local setups and manifests for k3s, "
                "unless you tell me otherwise."
            ),
        ),
        (
            _user(
                "Good. First real question then: what's the cleanest way to share one asyncpg "
                "pool across FastAPI requests? Right now every handler opens its own connection."
            ),
            _reply(
                "Create the pool once in the app's lifespan and hand out connections through a "
                "dependency:\n\n"
                "```python\n"
                "from collections.abc import AsyncIterator\n"
                "from contextlib import asynccontextmanager\n\n"
                "import asyncpg\n"
                "from fastapi import Depends, FastAPI, HTTPException, Request\n\n\n"
                "@asynccontextmanager\n"
                "async def lifespan(app: FastAPI) -> AsyncIterator[None]:\n"
                "    app.state.pool = await asyncpg.create_pool(\n"
                "        dsn=settings.database_url, min_size=2, max_size=10\n"
                "    )\n"
                "    try:\n"
                "        yield\n"
                "    finally:\n"
                "        await app.state.pool.close()\n\n\n"
                "app = FastAPI(lifespan=lifespan)\n\n\n"
                "async def get_conn(request: Request) -> AsyncIterator[asyncpg.Connection]:\n"
                "    async with request.app.state.pool.acquire() as conn:\n"
                "        yield conn\n\n\n"
                f"{_HANDLER}"
                "```\n\n"
                "- `acquire()` as a context manager returns the connection to the pool even when "
                "the handler raises.\n"
                "- Size it per replica: `max_size` times the number of API pods has to stay well "
                "under Postgres's `max_connections` (100 by default), with room for migrations "
                "and the workers.\n"
                "- Start with `max_size=10` and watch `pool.get_size()` / `get_idle_size()` "
                "under load before raising it."
            ),
        ),
        (
            _user(
                "Makes sense. And in Compose, how do I keep the api container from starting "
                "before Postgres accepts connections?"
            ),
            _reply(
                "Give the database a healthcheck and make the api wait for it to be healthy:"
                "\n\n"
                "```yaml\n"
                "services:\n"
                "  db:\n"
                "    image: postgres:16\n"
                "    healthcheck:\n"
                '      test: ["CMD-SHELL", "pg_isready -U $$POSTGRES_USER -d $$POSTGRES_DB"]\n'
                "      interval: 2s\n"
                "      timeout: 3s\n"
                "      retries: 15\n"
                "  api:\n"
                "    build: .\n"
                "    depends_on:\n"
                "      db:\n"
                "        condition: service_healthy\n"
                "```\n\n"
                "Plain `depends_on` only waits for the container to start, not for Postgres to "
                "listen; `condition: service_healthy` waits for `pg_isready` to pass. The `$$` "
                "keeps Compose from expanding the variables itself."
            ),
        ),
    )


_FASTAPI_HANDLER = f"```python\n{_HANDLER}```"

_GO_HANDLER = """```go
package shipment

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"
)

type Shipment struct {
	ID        int64     `json:"id"`
	Status    string    `json:"status"`
	UpdatedAt time.Time `json:"updated_at"`
}

var ErrNotFound = errors.New("shipment not found")

// Store is all the handler needs from the database layer.
type Store interface {
	Shipment(ctx context.Context, id int64) (Shipment, error)
}

type Handler struct {
	store Store
}

func NewHandler(store Store) *Handler { return &Handler{store: store} }

func (h *Handler) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /shipments/{id}", h.getShipment)
}

func (h *Handler) getShipment(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		writeError(w, http.StatusUnprocessableEntity, "id must be an integer")
		return
	}
	s, err := h.store.Shipment(r.Context(), id)
	if errors.Is(err, ErrNotFound) {
		writeError(w, http.StatusNotFound, "shipment not found")
		return
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal error")
		return
	}
	writeJSON(w, http.StatusOK, s)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, detail string) {
	writeJSON(w, status, map[string]string{"detail": detail})
}
```"""

_GO_TEST = """```go
type fakeStore map[int64]Shipment

func (f fakeStore) Shipment(_ context.Context, id int64) (Shipment, error) {
	s, ok := f[id]
	if !ok {
		return Shipment{}, ErrNotFound
	}
	return s, nil
}

func TestGetShipment(t *testing.T) {
	mux := http.NewServeMux()
	NewHandler(fakeStore{7: {ID: 7, Status: "in_transit"}}).Register(mux)

	for _, tc := range []struct {
		path string
		want int
	}{
		{"/shipments/7", http.StatusOK},
		{"/shipments/8", http.StatusNotFound},
		{"/shipments/abc", http.StatusUnprocessableEntity},
	} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
		if rec.Code != tc.want {
			t.Errorf("GET %s = %d, want %d", tc.path, rec.Code, tc.want)
		}
	}
}
```"""


def _port_turns(anchor: float) -> tuple[tuple[Msg, ...], ...]:
    return (
        (
            _user(
                f"{go_news(anchor)}\n\n"
                "Can you port this FastAPI handler to Go's net/http? Standard library only, "
                f"no router package.\n\n{_FASTAPI_HANDLER}"
            ),
            _reply(
                "Here it is with only the standard library. Since Go 1.22 `http.ServeMux` "
                "matches methods and path wildcards, so no router is needed:\n\n"
                f"{_GO_HANDLER}\n\n"
                "What maps to what:\n"
                '- `GET /shipments/{id}` plus `r.PathValue("id")` replaces the path '
                "parameter; FastAPI answered 422 when it wasn't an int, so this does too.\n"
                '- Errors keep FastAPI\'s `{"detail": ...}` body, so existing clients see '
                "the same shape.\n"
                "- `time.Time` encodes as RFC 3339, which is what `isoformat()` gave you for "
                "aware datetimes.\n"
                "- The SQL moves behind `Store`: the handler no longer knows about "
                "connections, which also makes it easy to test."
            ),
        ),
        (
            _user("Nice. How would I test that without a database?"),
            _reply(
                "Put a map behind the interface and go through the mux with `httptest`:\n\n"
                f"{_GO_TEST}\n\n"
                "Going through `mux.ServeHTTP` rather than calling `getShipment` directly "
                "matters: `r.PathValue` is only filled in when the pattern matched. Run it "
                "with `go test -race ./...`."
            ),
        ),
    )


_LAYOUT = """```
shipments/
├── cmd/
│   └── shipments-api/
│       └── main.go       # flags, config, wiring; nothing else
├── internal/
│   ├── shipment/         # the domain: types, rules, the Store interface
│   ├── storage/          # implements shipment.Store
│   ├── httpapi/          # handlers, routing, JSON helpers
│   └── platform/         # logging, config, metrics
├── go.mod
└── go.sum
```"""


def _layout_turns() -> tuple[tuple[Msg, ...], ...]:
    return (
        (
            _user(
                "we're on Go 1.23 for every service now — how should I lay out internal packages?"
            ),
            _reply(
                "Package by what the code is about, keep `cmd/` thin, and put everything "
                "else under `internal/`:\n\n"
                f"{_LAYOUT}\n\n"
                "- `internal/` is enforced by the compiler: nothing outside the module can "
                "import it, so you can refactor freely.\n"
                "- Dependencies point inward: `httpapi` and `storage` import `shipment`, never "
                "the other way round. The domain package has no `net/http` in it.\n"
                "- Avoid `models`, `utils` and `common` packages; a name like `shipment` lets "
                "call sites read as `shipment.Store`.\n"
                "- Skip `pkg/` unless you really publish a library; one module per service."
            ),
        ),
        (
            _user("and if three services need the same JSON error helper?"),
            _reply(
                "Then it can't live in any one service's `internal/`. Either copy the twenty "
                "lines (often the right call for something this small) or move it to a small "
                "shared module that every service requires, versioned with tags. For local "
                "work on both at once, a `go.work` file saves you the `replace` directives."
            ),
        ),
    )
