"""`Client`: the synchronous client of moeedb's collections API (over httpx)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

import httpx

from moeedb import _http, _wire
from moeedb.batching import DEFAULT_MAX_REQUEST_BYTES, MAX_DOCUMENTS_PER_UPSERT
from moeedb.collection import CollectionInfo, CollectionSummary, Distance
from moeedb.document import DeleteResult, Document, DocumentLike, DocumentPage, UpsertResult, Vector
from moeedb.retry import RetryPolicy
from moeedb.search import Fusion, Norm, SearchMode, SearchResult, Using

__all__ = ["Client"]

T = TypeVar("T")


class Client:
    """A synchronous client of one moeedb server's collections API and `/v1/embeddings`.

    `api_key` is sent as `Authorization: Bearer KEY`. Answers 429 and 503
    `unavailable_error` are retried up to `max_retries` times with exponential
    backoff (from `retry_backoff` seconds) honouring `Retry-After`; nothing else
    is retried. Use it as a context manager, or call `close()`.
    """

    def __init__(
        self,
        url: str = _http.DEFAULT_URL,
        api_key: str | None = None,
        timeout: float | None = _http.DEFAULT_TIMEOUT,
        max_retries: int = 3,
        *,
        retry_backoff: float = 0.5,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        headers: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = _http.base_url(url)
        self.retry = RetryPolicy(max_retries=max_retries, backoff=retry_backoff)
        self.max_request_bytes = max_request_bytes
        self._http = httpx.Client(base_url=self.url, headers=_http.headers(api_key, headers),
                                  timeout=timeout, transport=transport)

    # -- lifecycle -------------------------------------------------------

    def close(self) -> None:
        """Close the connection pool; the client cannot be used afterwards."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"moeedb.Client({self.url!r})"

    # -- transport -------------------------------------------------------

    def _send(self, operation: _wire.Operation[T]) -> T:
        exchange = _http.Exchange(operation, self.retry)
        for request in exchange:
            if request.delay:
                time.sleep(request.delay)
            with request.sending(self.url):
                exchange.reply(self._http.request(request.method, request.path, params=request.params,
                                                  content=request.content, headers=request.headers))
        return exchange.result

    # -- collections -----------------------------------------------------

    def create_collection(
        self,
        name: str,
        *,
        vector_size: int | None = None,
        distance: Distance | None = None,
        alpha: float | None = None,
        lexical: bool | Mapping[str, Any] | None = None,
        index: Mapping[str, Any] | None = None,
        text_key: str | None = None,
        shards: int | None = None,
        replicas: int | None = None,
        exist_ok: bool = False,
    ) -> bool:
        """Create collection `name`; True when created, False when it existed and `exist_ok`.

        Without `vector_size` the server embeds documents with its model; with it the
        collection holds the client's vectors (`distance` Cosine, Dot or Euclid). An
        existing name raises `ConflictError` unless `exist_ok` (its setup is not compared).
        """
        return self._send(_wire.create_collection(name, vector_size=vector_size, distance=distance, alpha=alpha,
                                                  lexical=lexical, index=index, text_key=text_key, shards=shards,
                                                  replicas=replicas, exist_ok=exist_ok))

    def get_collection(self, name: str) -> CollectionInfo:
        """Describe collection `name` (raises `NotFoundError` when there is none)."""
        return self._send(_wire.get_collection(name))

    def list_collections(self) -> list[CollectionSummary]:
        """Every collection's name and document count."""
        return self._send(_wire.list_collections())

    def delete_collection(self, name: str, *, missing_ok: bool = False) -> bool:
        """Drop collection `name` and its documents; True when dropped.

        A missing collection raises `NotFoundError`, or returns False with `missing_ok`.
        """
        return self._send(_wire.delete_collection(name, missing_ok))

    def collection_exists(self, name: str) -> bool:
        """Whether collection `name` exists."""
        return self._send(_wire.collection_exists(name))

    def count(self, collection: str) -> int:
        """The number of documents in `collection`."""
        return self._send(_wire.count(collection))

    # -- documents -------------------------------------------------------

    def upsert(self, collection: str, documents: Iterable[DocumentLike], *, wait: bool = True,
               batch_size: int = MAX_DOCUMENTS_PER_UPSERT) -> UpsertResult:
        """Insert or replace `documents` (by id); the server embeds those without a vector.

        More than `batch_size` (at most the server's 1000) documents, or a body over
        `max_request_bytes`, go as several requests: each batch is its own atomic
        write, so an error leaves the batches before it stored. `wait` syncs each
        write before the answer; the result's `seq` is the last batch's.
        """
        return self._send(_wire.upsert(collection, documents, wait=wait, batch_size=batch_size,
                                       max_bytes=self.max_request_bytes))

    def get(self, collection: str, id: str) -> Document:
        """Document `id` of `collection` (`NotFoundError` if either is missing)."""
        return self._send(_wire.get_document(collection, id))

    def delete(self, collection: str, ids: str | Sequence[str] | None = None, *,
               filter: Mapping[str, Any] | None = None, wait: bool = True) -> DeleteResult:
        """Delete documents by id, or every document matching a moeedb `filter` (one of them).

        Ids go 1000 per request, each request one atomic write (an error leaves the
        batches before it deleted); ids that do not exist are counted in `missing`, not
        raised. A filter deletes what it matches in one atomic write; an empty one is a
        ValueError (`delete_collection` drops everything). `wait` syncs each write
        before its answer. A missing collection raises `NotFoundError`.
        """
        return self._send(_wire.delete(collection, ids, filter=filter, wait=wait,
                                       max_bytes=self.max_request_bytes))

    def list_documents(self, collection: str, *, limit: int = 100, after: str | None = None) -> DocumentPage:
        """One page of documents in byte order of their ids, starting after id `after`.

        `limit` is 1-1000; pass the page's `next_after` as `after` for the next one.
        """
        return self._send(_wire.list_documents(collection, limit, after))

    def iter_documents(self, collection: str, *, page_size: int = 1000, after: str | None = None) -> Iterator[Document]:
        """Every document of `collection` (after id `after`), fetched page by page.

        Each page is read from its own snapshot: writes made while iterating may or
        may not be seen.
        """
        while True:
            page = self.list_documents(collection, limit=page_size, after=after)
            yield from page.documents
            if page.next_after is None:
                return
            after = page.next_after

    # -- search and embeddings --------------------------------------------

    def search(
        self,
        collection: str,
        query: str | None = None,
        *,
        vector: Vector | None = None,
        using: Using | None = None,
        k: int = 10,
        alpha: float | None = None,
        mode: SearchMode | None = None,
        filter: Mapping[str, Any] | None = None,
        exact: bool | None = None,
        min_seq: int | None = None,
        partial: bool | None = None,
        beta: float | None = None,
        w_hs: float | None = None,
        fusion: Fusion | None = None,
        norm: Norm | None = None,
        rrf_k: float | None = None,
        oversample: float | None = None,
    ) -> SearchResult:
        """The `k` best documents for a text `query` and/or the client's `vector`.

        `alpha` weighs RW against HS (`score = score_hs + alpha * score_rw`; default the
        collection's); `mode` is fused, hs, rw, lexical or hybrid (with `beta`, `w_hs`,
        `fusion`, `norm`, `rrf_k`); `filter` is moeedb's metadata filter; `min_seq`
        waits for that write to be applied; `oversample` is the candidates an ANN or coded
        index proposes per hit (re-scored exactly; default the collection's). Fields left
        None take the server's defaults.
        """
        return self._send(_wire.search(collection, query, vector=vector, using=using, k=k, alpha=alpha, mode=mode,
                                       filter=filter, exact=exact, min_seq=min_seq, partial=partial, beta=beta,
                                       w_hs=w_hs, fusion=fusion, norm=norm, rrf_k=rrf_k,
                                       oversample=oversample))

    def embed(self, texts: str | Sequence[str], *, model: str = "default",
              batch_size: int = 1000) -> list[list[float]]:
        """The server's embeddings of `texts` over `/v1/embeddings`, in order.

        `model` `default` (or the served name) is the fused vector `[hs; rw]`, each half
        unit length; `NAME:hs` and `NAME:rw` the raw halves.
        """
        return self._send(_wire.embed(texts, model, batch_size=batch_size, max_bytes=self.max_request_bytes))
