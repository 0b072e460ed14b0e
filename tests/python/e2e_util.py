"""What the end-to-end tests share: moeedb's embeddings of texts over its
OpenAI route, and moeedb's own search of a collection (the reference the
clients' answers are checked against)."""

from __future__ import annotations

import math
from typing import Any

import httpx

from conftest import Server


def embed(server: Server, texts: list[str]) -> list[list[float]]:
    """The fused vectors moeedb's /v1/embeddings returns for `texts`."""
    r = httpx.post(f"{server.base}/v1/embeddings", json={"model": server.model, "input": texts},
                   headers={"Authorization": f"Bearer {server.api_key}"}, timeout=120)
    r.raise_for_status()
    return [d["embedding"] for d in sorted(r.json()["data"], key=lambda d: d["index"])]


def api(server: Server, method: str, path: str, body: Any = None) -> httpx.Response:
    """A call to moeedb's own collections API."""
    return httpx.request(method, f"{server.base}{path}", json=body, timeout=120,
                         headers={"Authorization": f"Bearer {server.api_key}"})


def norm(v: list[float]) -> float:
    return math.sqrt(sum(x * x for x in v))


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b)) / (norm(a) * norm(b))
