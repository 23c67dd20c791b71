"""MemoryOS over an OpenAI-compatible embeddings API, faked at the HTTP transport only.

The fake endpoint embeds a text as a bag of hashed words, so search results are meaningful.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path

from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from memstrata import MemoryOS

DIM = 64


def _vector(text: str) -> list[float]:
    out = [0.0] * DIM
    for word in text.lower().replace(":", " ").split():
        out[zlib.crc32(word.strip("?.!,").encode()) % DIM] += 1.0
    return out


def _embeddings(request: Request) -> Response:
    body = json.loads(request.data)
    assert request.headers["Authorization"] == "Bearer sk-test"
    data = [{"index": i, "embedding": _vector(t)} for i, t in enumerate(body["input"])]
    return Response(json.dumps({"data": data, "model": body["model"]}), 200,
                    content_type="application/json")  # fmt: skip


def test_add_and_search_through_an_openai_compatible_endpoint(
    httpserver: HTTPServer, tmp_path: Path
) -> None:
    httpserver.expect_request("/v1/embeddings", method="POST").respond_with_handler(_embeddings)
    settings = {
        "openai_base_url": httpserver.url_for("/v1"),
        "openai_api_key": "sk-test",
        "openai_model": "fake-embed",
    }
    with MemoryOS.open(str(tmp_path / "m.db"), embedder="openai", **settings) as mos:
        mos.create_user("u")
        cube = mos.create_cube("c", owner="u")
        assert cube.embedder == f"openai:fake-embed/{DIM}"
        ids = mos.add("gardening tomatoes", user_id="u", cube_id=cube.cube_id)
        ids += mos.add("quantum physics lecture", user_id="u", cube_id=cube.cube_id)
        hits = mos.search("physics", user_id="u", top_k=2)
        assert hits[0].item.id == ids[1]
    with MemoryOS.open(str(tmp_path / "m.db"), **settings) as mos:  # the file remembers
        assert mos.settings.embedder == "openai"
        assert mos.search("tomatoes", user_id="u", top_k=1)[0].item.id == ids[0]
