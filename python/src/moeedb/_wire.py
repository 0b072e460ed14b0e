"""The collections API's requests and answers, shared by the sync and async clients.

A request function returns a `Call`: the HTTP method, path, query parameters,
JSON body and how to read the answer. An operation of several requests (a write
in batches) returns a `Plan`: a generator that yields its calls one at a time,
is sent each call's answer, and returns the operation's result. No I/O here:
`_http.Exchange` turns either into the requests a client sends.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, Union
from urllib.parse import quote

from moeedb.batching import MAX_DOCUMENTS_PER_UPSERT, MAX_IDS_PER_DELETE, batches
from moeedb.collection import CollectionInfo, CollectionSummary
from moeedb.document import (
    DeleteResult,
    Document,
    DocumentLike,
    DocumentPage,
    UpsertResult,
    Vector,
    to_document,
    vector_to_json,
)
from moeedb.errors import ConflictError, MoeedbError, NotFoundError
from moeedb.search import SearchResult

T = TypeVar("T")


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request of the API and the reader of its JSON answer.

    `otherwise` is an error answer that is a result rather than a failure: its
    class and the result it stands for (a 409 with `exist_ok`: False).
    """

    method: str
    path: str
    parse: Callable[[Any], T]
    body: Any = None
    params: Mapping[str, str] | None = None
    otherwise: tuple[type[MoeedbError], T] | None = None


# Several calls: yields each, is sent its parsed answer, returns the result.
Plan = Generator[Call[Any], Any, T]
# What a client method hands to `_send`.
Operation = Union[Call[T], Plan[T]]


def _check(value: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"a collection name or document id must be a non-empty string, got {value!r}")
    return value


def _seg(value: str) -> str:
    return quote(_check(value), safe="")


def _collection(name: str) -> str:
    return f"/collections/{_seg(name)}"


def _present(fields: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """The fields whose value is not None (None leaves a field to the server's default)."""
    return {key: value for key, value in fields if value is not None}


# -- collections ---------------------------------------------------------------


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
    exist_ok: bool,
) -> Call[bool]:
    """True when created; False when it existed and `exist_ok` (else the 409 is raised)."""
    body = _present((
        ("vector_size", vector_size),
        ("distance", distance),
        ("alpha", alpha),
        ("lexical", dict(lexical) if isinstance(lexical, Mapping) else lexical),
        ("index", dict(index) if index is not None else None),
        ("text_key", text_key),
        ("shards", shards),
        ("replicas", replicas),
    ))
    return Call("PUT", _collection(name), lambda _: True, body=body,
                otherwise=(ConflictError, False) if exist_ok else None)


def get_collection(name: str) -> Call[CollectionInfo]:
    return Call("GET", _collection(name), CollectionInfo.from_json)


def collection_exists(name: str) -> Call[bool]:
    return Call("GET", _collection(name), lambda _: True, otherwise=(NotFoundError, False))


def count(name: str) -> Call[int]:
    return Call("GET", _collection(name), lambda data: CollectionInfo.from_json(data).documents)


def list_collections() -> Call[list[CollectionSummary]]:
    def parse(data: Any) -> list[CollectionSummary]:
        return [CollectionSummary(name=str(c["name"]), documents=int(c.get("documents", 0)))
                for c in data.get("collections", [])]

    return Call("GET", "/collections", parse)


def delete_collection(name: str, missing_ok: bool) -> Call[bool]:
    """True when dropped; False when missing and `missing_ok` (else the 404 is raised)."""
    return Call("DELETE", _collection(name), lambda _: True, otherwise=(NotFoundError, False) if missing_ok else None)


# -- documents -----------------------------------------------------------------


def upsert(collection: str, documents: Iterable[DocumentLike], *, wait: bool, batch_size: int,
           max_bytes: int) -> Plan[UpsertResult]:
    """One request per batch (each its own atomic write); the results summed."""
    payload = [to_document(d).to_json() for d in documents]
    if not payload:
        raise ValueError("upsert needs at least one document")
    path = f"{_collection(collection)}/documents"

    def parse(data: Any) -> UpsertResult:
        return UpsertResult(upserted=int(data["upserted"]), replaced=int(data.get("replaced", 0)),
                            durable=bool(data.get("durable", wait)), seq=int(data.get("seq", 0)))

    total = UpsertResult(upserted=0, replaced=0, durable=True, seq=0, batches=0)
    for group in batches(payload, max_items=min(batch_size, MAX_DOCUMENTS_PER_UPSERT), max_bytes=max_bytes):
        r: UpsertResult = yield Call("POST", path, parse, body={"documents": group, "wait": wait})
        total.upserted += r.upserted
        total.replaced += r.replaced
        total.durable = total.durable and r.durable
        total.seq = max(total.seq, r.seq)
        total.batches += 1
    return total


def get_document(collection: str, id: str) -> Call[Document]:
    return Call("GET", f"{_collection(collection)}/documents/{_seg(id)}", Document.from_json)


def delete(collection: str, ids: str | Sequence[str] | None, *, filter: Mapping[str, Any] | None, wait: bool,
           max_bytes: int) -> Plan[DeleteResult]:
    """`POST .../documents/delete`: the ids (each once) 1000 per request, or one
    request for a filter; each request is one atomic write. The counts summed."""
    if (ids is None) == (filter is None):
        raise ValueError("delete takes ids or a filter (one of them)")
    path = f"{_collection(collection)}/documents/delete"
    if filter is not None:
        if not filter:
            raise ValueError("an empty filter would delete every document (delete_collection() drops them all)")
        given: list[str] = []
        selections: Iterable[dict[str, Any]] = [{"filter": dict(filter)}]
    else:
        given = list(dict.fromkeys(_check(id) for id in ([ids] if isinstance(ids, str) else ids or [])))
        selections = ({"ids": group} for group in batches(given, max_items=MAX_IDS_PER_DELETE, max_bytes=max_bytes))

    def parse(data: Any) -> DeleteResult:
        deleted = int(data.get("deleted", 0))
        return DeleteResult(deleted=deleted, missing=int(data.get("missing", 0)),
                            durable=bool(data.get("durable", wait)), seq=int(data["seq"]) if deleted else None)

    total = DeleteResult(ids=given)
    for selection in selections:
        r: DeleteResult = yield Call("POST", path, parse, body={**selection, "wait": wait})
        total.deleted += r.deleted
        total.missing += r.missing
        total.durable = total.durable and r.durable
        total.seq = max(total.seq or 0, r.seq) if r.seq is not None else total.seq
        total.batches += 1
    return total


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


# -- search and embeddings -----------------------------------------------------


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
    oversample: float | None = None,
) -> Call[SearchResult]:
    if query is None and vector is None:
        raise ValueError("search needs a query text, a vector, or both")
    body = _present((
        ("k", k),
        ("query", query),
        ("vector", vector_to_json(vector) if vector is not None else None),
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
        ("oversample", oversample),
    ))
    return Call("POST", f"{_collection(collection)}/search", SearchResult.from_json, body=body)


def embed(texts: str | Sequence[str], model: str, *, batch_size: int, max_bytes: int) -> Plan[list[list[float]]]:
    """`/v1/embeddings` in batches; the vectors in the order of `texts`."""
    def parse(data: Any) -> list[list[float]]:
        rows = sorted(data.get("data", []), key=lambda d: int(d.get("index", 0)))
        return [[float(x) for x in row["embedding"]] for row in rows]

    out: list[list[float]] = []
    for group in batches([texts] if isinstance(texts, str) else list(texts), max_items=batch_size,
                         max_bytes=max_bytes):
        vectors: list[list[float]] = yield Call("POST", "/v1/embeddings", parse, body={"model": model, "input": group})
        out.extend(vectors)
    return out
