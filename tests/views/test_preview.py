"""/preview: the agent's volatile block for a typed message, read-only and escaped."""

from __future__ import annotations

import hashlib
import re
import time
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from dashboard.store.records import NewMessage
from dashboard.store.session_store import SessionStore
from tests.support.app import make_app

EVIL = '<script>alert("x")</script> the marmoset deploy'


@pytest.fixture
def home(tmp_path: Path) -> Path:
    root = tmp_path / "home"
    (root / "memories").mkdir(parents=True)
    (root / "memories" / "USER.md").write_text("Name: Ada\n§\nLikes <b>bold</b> tea", "utf-8")
    now = time.time()
    with SessionStore(root / "state.db") as store:
        store.create_session("cli", session_id="old", model="model-old", started_at=now - 9e5)
        store.append_messages("old", [NewMessage("user", EVIL, timestamp=now - 9e5)])
        store.create_session("cli", session_id="mine", model="model-mine", started_at=now - 60)
        store.append_messages("mine", [NewMessage("user", "marmoset again", timestamp=now - 60)])
    return root


@pytest.fixture
def client(home: Path, tmp_path: Path) -> FlaskClient:
    return make_app(home, tmp_path / "data").test_client()


def part(html: str, kind: str) -> str:
    found = re.search(rf'data-part="{kind}">(.*?)</section>', html, re.S)
    assert found, kind
    return found.group(1)


def test_the_page_shows_every_part_with_sizes(client: FlaskClient) -> None:
    html = client.get("/preview", query_string={"message": "How is the marmoset deploy?"})
    assert html.status_code == 200
    text = html.get_data(as_text=True)
    assert "USER PROFILE (who the user is)" in part(text, "user")
    assert "MEMORY.md is empty or missing" in part(text, "memory")
    recalled = part(text, "recalled")
    assert "# Relevant Memories" in recalled and "[Long-term — 10 days ago]" in recalled
    assert 'href="/sessions/old#m' in recalled and 'href="/sessions/mine#m' in recalled
    assert "Model: model-mine" in part(text, "context")  # the latest session's model
    chars = int(re.search(r"data-preview-chars>([\d,]+)<", text).group(1).replace(",", ""))
    assert chars > 200


def test_history_and_memory_files_are_escaped(client: FlaskClient) -> None:
    text = client.get("/preview", query_string={"message": "marmoset"}).get_data(as_text=True)
    assert "<script>alert" not in text and "&lt;script&gt;alert(&#34;x&#34;)" in text
    assert "<b>bold</b>" not in text and "&lt;b&gt;bold&lt;/b&gt;" in text


def test_continuing_a_session_leaves_its_chain_out(client: FlaskClient) -> None:
    text = client.get("/preview", query_string={"message": "marmoset", "session": "mine"})
    recalled = part(text.get_data(as_text=True), "recalled")
    assert "/sessions/old" in recalled and "/sessions/mine" not in recalled
    assert "Session: mine\nModel: model-mine" in text.get_data(as_text=True)
    other = client.get("/preview", query_string={"message": "x", "session": "old"})
    assert "Model: model-old" in other.get_data(as_text=True)


def test_an_empty_message_explains_itself(client: FlaskClient) -> None:
    text = client.get("/preview").get_data(as_text=True)
    assert "Type a message to see what the agent would recall" in text
    assert "Session: (new session)" in text
    nothing = client.get("/preview", query_string={"message": "zebrafish quantum"})
    assert "Nothing recalled" in nothing.get_data(as_text=True)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"message": "x", "session": "no-such-session"}, "No session with id"),
        ({"message": "y" * 20_001}, "at most 20,000"),
    ],
)
def test_bad_input_is_a_clear_400(client: FlaskClient, params: dict, message: str) -> None:
    response = client.get("/preview", query_string=params)
    assert response.status_code == 400
    assert message in response.get_data(as_text=True)
    partial = client.get(
        "/preview", query_string=params, headers={"HX-Request": "true", "HX-Target": "preview"}
    )
    assert partial.status_code == 400 and "<html" not in partial.get_data(as_text=True)


def test_htmx_gets_the_partial(client: FlaskClient) -> None:
    response = client.get(
        "/preview",
        query_string={"message": "marmoset"},
        headers={"HX-Request": "true", "HX-Target": "preview"},
    )
    text = response.get_data(as_text=True)
    assert text.lstrip().startswith('<section id="preview"') and "<html" not in text


def test_previewing_writes_nothing(client: FlaskClient, home: Path, tmp_path: Path) -> None:
    def digest() -> str:
        return hashlib.sha256((home / "state.db").read_bytes()).hexdigest()

    before = digest()
    for message in ("marmoset", "deploy plan", ""):
        client.get("/preview", query_string={"message": message, "session": "mine"})
    assert digest() == before


def test_a_missing_store_gets_the_clear_page(tmp_path: Path) -> None:
    app = make_app(tmp_path / "nohome", tmp_path / "data")
    response = app.test_client().get("/preview", query_string={"message": "hello world"})
    assert response.status_code == 500 and "state.db" in response.get_data(as_text=True)


def test_the_page_is_in_the_menu_and_csp_clean(client: FlaskClient) -> None:
    response = client.get("/preview")
    text = response.get_data(as_text=True)
    assert 'href="/preview"' in client.get("/overview").get_data(as_text=True)
    assert "<script>" not in text and " style=" not in text
    assert "script-src 'self'" in response.headers["Content-Security-Policy"]


def test_the_json_api_is_the_same_block(client: FlaskClient) -> None:
    params = {"message": "marmoset", "session": "mine", "model": "m-x"}
    data = client.get("/api/preview", query_string=params).get_json()
    assert [p["kind"] for p in data["parts"]] == ["user", "memory", "recalled", "context"]
    assert data["text"] == "\n\n".join(p["text"] for p in data["parts"] if p["text"])
    assert data["chars"] == len(data["text"]) and data["tokens"] > 0
    (item,) = data["parts"][2]["items"]
    assert item["session_id"] == "old" and item["label"].startswith("Long-term — ")
    # An untitled session goes by the name every page gives it (its first words), as text.
    name = '<script>alert("x")</script> the marmoset deploy'
    recalled = part(client.get("/preview", query_string=params).get_data(as_text=True), "recalled")
    assert item["title"] == name and "Untitled session" not in recalled
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; the marmoset deploy</a>" in recalled
    assert data["parts"][3]["text"].endswith("Session: mine\nModel: m-x")
    page = client.get("/preview", query_string=params).get_data(as_text=True)
    assert f"data-preview-chars>{data['chars']:,}<" in page
    bad = client.get("/api/preview", query_string={"message": "x", "session": "nope"})
    assert bad.status_code == 400 and "No session" in bad.get_json()["error"]


@pytest.mark.parametrize(
    "config",
    [
        "model:\n  default: cfg/model-next\n  provider: openrouter\n",  # today's Hermes
        "model: cfg/model-next\n",  # older configs name the model alone
    ],
)
def test_a_new_session_names_the_model_from_config_yaml(
    home: Path, tmp_path: Path, config: str
) -> None:
    (home / "config.yaml").write_text(config, encoding="utf-8")
    client = make_app(home, tmp_path / "data2").test_client()
    text = client.get("/preview", query_string={"message": "marmoset"}).get_data(as_text=True)
    assert "Model: cfg/model-next" in part(text, "context")  # what the next session runs
    inside = client.get("/preview", query_string={"message": "marmoset", "session": "old"})
    assert "Model: model-old" in part(inside.get_data(as_text=True), "context")
    assert 'value="cfg/model-next"' not in text  # the form's field stays empty: a default


def test_each_profile_previews_its_own_memory_and_history_and_all_asks_for_one(
    tmp_path: Path,
) -> None:
    from tests.support import hermes_shapes as hs

    facts = hs.build_profiles_home(tmp_path / "hermes")
    client = make_app(facts.root, tmp_path / "data").test_client()
    # Both profiles hold this conversation (shared session ids): each recalls its own.
    words = "the nightly report job and the read replica"
    for name, other in (("legacy", "default"), ("default", "legacy")):
        text = client.get("/preview", query_string={"message": words, "profile": name}).get_data(
            as_text=True
        )
        assert f"The {name} profile&#39;s user." in part(text, "user")
        assert f"Notes kept by the {name} profile." in part(text, "memory")
        assert f"The {other} profile" not in text and f"by the {other} profile" not in text
        ids = set(re.findall(r'href="/sessions/([^"#?]+)', part(text, "recalled")))
        assert ids and all(i.startswith("legacy:") == (name == "legacy") for i in ids), ids
    everything = client.get("/preview", query_string={"message": words, "profile": "all"})
    page = everything.get_data(as_text=True)
    assert "USER PROFILE" not in page and 'data-part="user"' not in page
    assert "one profile" in page
    for name in ("default", "legacy", "empty"):
        assert re.search(rf'href="/preview\?[^"]*profile={name}"', page), name
    api = client.get("/api/preview", query_string={"message": words, "profile": "all"})
    assert api.status_code == 400 and "one profile" in api.get_json()["error"]
