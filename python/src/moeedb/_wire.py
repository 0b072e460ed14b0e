"""The collections API's requests and answers, shared by the sync and async clients.

Each function returns a `Call`: the HTTP method, path, query parameters, JSON
body and how to read the answer. The clients only send calls; no I/O here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from urllib.parse import quote

from moeedb.collection import CollectionInfo, CollectionSummary
from moeedb.document import Document, DocumentPage, UpsertResult, Vector, vector_to_json
from moeedb.search import SearchResult

T = TypeVar("T")


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request of the API and the reader of its JSON answer."""

    method: str
    path: str
    parse: Callable[[Any], T]
    body: Any = None
    params: Mapping[str, str] | None = None


def _seg(value: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"a collection name or document id must be a non-empty string, got {value!r}")
    return quote(value, safe="")


def _collection(name: str) -> str:
    return f"/collections/{_seg(name)}"


def create_collection(
    name: str,
    *,
    vector_size: int | None,
    distance: str | None,
    alpha: float | None,
    lexical: bool | Mapping[str, Any] | None,
    index: Mapping[str, Any] | None,
    text_key: str | None,
    shards: int | None,
    replicas: int | None,
) -> Call[None]:
    body: dict[str, Any] = {}
    for key, value in (
        ("vector_size", vector_size),
        ("distance", distance),
        ("alpha", alpha),
        ("lexical", dict(lexical) if isinstance(lexical, Mapping) else lexical),
        ("index", dict(index) if index is not None else None),
        ("text_key", text_key),
        ("shards", shards),
        ("replicas", replicas),
    ):
        if value is not None:
            body[key] = value
    return Call("PUT", _collection(name), lambda _: None, body=body)


def get_collection(name: str) -> Call[CollectionInfo]:
    return Call("GET", _collection(name), CollectionInfo.from_json)


def list_collections() -> Call[list[CollectionSummary]]:
    def parse(data: Any) -> list[CollectionSummary]:
        return [CollectionSummary(name=str(c["name"]), documents=int(c.get("documents", 0)))
                for c in data.get("collections", [])]

    return Call("GET", "/collections", parse)


def delete_collection(name: str) -> Call[None]:
    return Call("DELETE", _collection(name), lambda _: None)


def upsert(collection: str, documents: list[dict[str, Any]], wait: bool) -> Call[UpsertResult]:
    def parse(data: Any) -> UpsertResult:
        return UpsertResult(upserted=int(data["upserted"]), replaced=int(data.get("replaced", 0)),
                            durable=bool(data.get("durable", wait)), seq=int(data.get("seq", 0)))

    return Call("POST", f"{_collection(collection)}/documents", parse,
                body={"documents": documents, "wait": wait})


def get_document(collection: str, id: str) -> Call[Document]:
    return Call("GET", f"{_collection(collection)}/documents/{_seg(id)}", Document.from_json)


def delete_document(collection: str, id: str) -> Call[int]:
    """The answer is the removal's change-log number (`seq`)."""
    return Call("DELETE", f"{_collection(collection)}/documents/{_seg(id)}", lambda data: int(data.get("seq", 0)))


def list_documents(collection: str, limit: int, after: str | None) -> Call[DocumentPage]:
    params = {"limit": str(limit)}
    if after is not None:
        params["after"] = after

    def parse(data: Any) -> DocumentPage:
        next_after = data.get("next_after")
        return DocumentPage(documents=[Document.from_json(d) for d in data.get("documents", [])],
                            next_after=str(next_after) if next_after is not None else None,
                            total=int(data.get("total", 0)))

    return Call("GET", f"{_collection(collection)}/documents", parse, params=params)


def search(
    collection: str,
    query: str | None,
    *,
    vector: Vector | None,
    using: str | None,
    k: int,
    alpha: float | None,
    mode: str | None,
    filter: Mapping[str, Any] | None,
    exact: bool | None,
    min_seq: int | None,
    partial: bool | None,
    beta: float | None,
    w_hs: float | None,
    fusion: str | None,
    norm: str | None,
    rrf_k: float | None,
) -> Call[SearchResult]:
    if query is None and vector is None:
        raise ValueError("search needs a query text, a vector, or both")
    body: dict[str, Any] = {"k": k}
    if query is not None:
        body["query"] = query
    if vector is not None:
        body["vector"] = vector_to_json(vector)
    for key, value in (
        ("using", using),
        ("alpha", alpha),
        ("mode", mode),
        ("filter", dict(filter) if filter is not None else None),
        ("exact", exact),
        ("min_seq", min_seq),
        ("partial", partial),
        ("beta", beta),
        ("w_hs", w_hs),
        ("fusion", fusion),
        ("norm", norm),
        ("rrf_k", rrf_k),
    ):
        if value is not None:
            body[key] = value
    return Call("POST", f"{_collection(collection)}/search", SearchResult.from_json, body=body)


def embed(texts: Sequence[str], model: str) -> Call[list[list[float]]]:
    def parse(data: Any) -> list[list[float]]:
        rows = sorted(data.get("data", []), key=lambda d: int(d.get("index", 0)))
        return [[float(x) for x in row["embedding"]] for row in rows]

    return Call("POST", "/v1/embeddings", parse, body={"model": model, "input": list(texts)})
