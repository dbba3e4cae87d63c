"""The semantic tier end to end, with the local model (all-MiniLM-L6-v2 from its PyPI wheel):
`dovecote dev --embedder local` embeds inline-posted transcripts in the background, and a question
sharing no word with the message that answers it is found only with `semantic=on`."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import bearer, start_dev
from tests.support.transcripts import transcript

pytestmark = pytest.mark.e2e

EMBED_WAIT_S = 180  # a bound on a hang: the model embeds a few messages in well under a second
QUESTION = "laptop battery drains fast"  # no word (nor substring the trigram index could match) below
SESSIONS = {
    "sem-target": ["the notebook loses charge quickly", "did you check the power settings"],
    "sem-zoo": ["the giraffe ate leaves at the zoo", "and the elephants were asleep"],
    "sem-bread": ["we baked sourdough bread yesterday", "the crust came out well"],
}


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with start_dev(tmp_path_factory.mktemp("semantic"), "--embedder", "local") as started:
        yield started


def test_a_paraphrase_sharing_no_word_is_found_only_with_the_tier_on(runtime: dict[str, Any]) -> None:
    caller = bearer(runtime["tokens"]["caller"])
    with httpx.Client(base_url=runtime["endpoint"], headers=caller, timeout=60) as http:
        for session_id, texts in SESSIONS.items():
            assert http.post("/v1/transcripts", json=transcript(session_id, texts)).status_code == 200
        deadline = time.monotonic() + EMBED_WAIT_S
        while True:
            on = http.get("/v1/recall/search", params={"q": QUESTION, "semantic": "on"})
            assert on.status_code == 200, on.text
            coverage = on.json()["vector_coverage"]
            assert coverage["ran"] is True
            if coverage["missing_msgs"] == 0 or time.monotonic() > deadline:
                break
            assert "vector_gap" in [w["code"] for w in on.json()["warnings"]]  # partial, and said so
            time.sleep(0.5)
        assert coverage == {"ran": True, "candidate_msgs": 6, "vectored_msgs": 6, "missing_msgs": 0}
        assert on.json()["results"][0]["session_id"] == "sem-target"
        assert "vector_gap" not in [w["code"] for w in on.json()["warnings"]]

        off = http.get("/v1/recall/search", params={"q": QUESTION, "semantic": "off"}).json()
        assert off["results"] == []
        assert off["vector_coverage"] == {"ran": False, "candidate_msgs": 0, "vectored_msgs": 0, "missing_msgs": 0}

        bad = http.get("/v1/recall/search", params={"q": QUESTION, "semantic": "maybe"})
        assert bad.status_code == 400
        assert bad.json()["error"]["code"] == "invalid_argument"


def test_the_runtime_says_the_tier_is_on(runtime: dict[str, Any]) -> None:
    assert "semantic tier on (local embedder" in Path(runtime["log"]).read_text()
