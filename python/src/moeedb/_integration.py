"""What the LangChain and LlamaIndex integrations share: their clients, the search
fields they pass on, the score parts they show, and `StoreCollection`, the one
collection a vector store works on."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from moeedb import _env
from moeedb.async_client import AsyncClient
from moeedb.client import Client
from moeedb.collection import CollectionInfo
from moeedb.document import Document, DocumentLike
from moeedb.errors import NotFoundError
from moeedb.search import Hit

# The moeedb search fields the stores' search methods take as keyword arguments.
SEARCH_FIELDS = frozenset(
    {"filter", "alpha", "mode", "beta", "min_seq", "exact", "partial", "w_hs", "fusion", "norm", "rrf_k", "using", "oversample"}
)


def clients(url: str | None, api_key: str | None, timeout: float | None, max_retries: int,
            client: Client | None = None, async_client: AsyncClient | None = None) -> tuple[Client, AsyncClient]:
    """The clients given, else new ones for `url` and `api_key` (defaults from the environment)."""
    resolved, key = _env.server_url(url), _env.api_key(api_key)
    return (client or Client(resolved, key, timeout, max_retries),
            async_client or AsyncClient(resolved, key, timeout, max_retries))


def search_options(kwargs: Mapping[str, Any], what: str = "search") -> dict[str, Any]:
    """The moeedb search fields among `kwargs` that are not None; any other name is a TypeError."""
    unknown = set(kwargs) - SEARCH_FIELDS
    if unknown:
        raise TypeError(f"unknown {what} argument(s) {sorted(unknown)}; moeedb takes {sorted(SEARCH_FIELDS)}")
    return {key: value for key, value in kwargs.items() if value is not None}


def score_parts(hit: Hit) -> dict[str, Any]:
    """A hit's scores as the stores put them in metadata."""
    return {
        "score": hit.score,
        "score_hs": hit.score_hs,
        "score_rw": hit.score_rw,
        "score_lex": hit.score_lex,
        "parts": {"hs": hit.parts.hs, "rw": hit.parts.rw, "lex": hit.parts.lex},
    }


def create_options(options: Mapping[str, Any], vector_size: int | None, distance: str) -> dict[str, Any]:
    """`create_collection`'s options: the store's, and a client-vector collection's size
    and distance when the documents come with vectors (`vector_size` not None)."""
    out = dict(options)
    if vector_size:
        out["vector_size"] = vector_size
        out["distance"] = distance
    return out


@contextmanager
def _unless_missing() -> Iterator[None]:
    """Leaves the block at the 404 of a missing collection, as if it had nothing to do."""
    try:
        yield
    except NotFoundError as e:
        if e.code != "collection_not_found":
            raise


class StoreCollection:
    """The collection `name` as a vector store uses it, through a sync and an async client.

    It is created at the store's first write (`create_collection` with `exist_ok`),
    described once (`info`, None while it does not exist), and a missing one reads
    as empty: searches find nothing, deletes and gets do nothing. `last_seq` is the
    change-log number of the last write through it: a search's `min_seq`.
    """

    def __init__(self, name: str, client: Client, async_client: AsyncClient) -> None:
        self.name = name
        self.client = client
        self.async_client = async_client
        self.last_seq: int | None = None
        self._ready = False
        self._info: CollectionInfo | None = None

    def _forget(self) -> None:
        self._ready, self._info = False, None

    # -- sync ------------------------------------------------------------------

    def info(self) -> CollectionInfo | None:
        """The collection's description (read once), or None while it does not exist."""
        if self._info is None:
            try:
                self._info = self.client.get_collection(self.name)
            except NotFoundError:
                return None
        return self._info

    def upsert(self, documents: Sequence[DocumentLike], create: Mapping[str, Any], *, wait: bool,
               batch_size: int) -> None:
        """Upsert `documents`, creating the collection (with `create`) at the first write."""
        if not self._ready:
            self.client.create_collection(self.name, exist_ok=True, **create)
            self._ready = True
        self.last_seq = self.client.upsert(self.name, documents, wait=wait, batch_size=batch_size).seq

    def search(self, **args: Any) -> list[Hit]:
        """The hits of `Client.search` with `args`; none when the collection is missing."""
        with _unless_missing():
            return self.client.search(self.name, **args).hits
        return []

    def delete(self, ids: Sequence[str] | None = None, *, filter: Mapping[str, Any] | None = None) -> None:
        """Delete by ids or by a moeedb filter (neither: nothing)."""
        if ids is None and filter is None:
            return
        with _unless_missing():
            seq = self.client.delete(self.name, ids, filter=filter).seq
            self.last_seq = seq if seq is not None else self.last_seq

    def get(self, ids: Sequence[str]) -> list[Document]:
        """The stored documents with these ids, in order; missing ones left out."""
        out = []
        for id in ids:
            with suppress(NotFoundError):
                out.append(self.client.get(self.name, id))
        return out

    def drop(self) -> None:
        """Drop the collection if it exists (the next write creates it again)."""
        self.client.delete_collection(self.name, missing_ok=True)
        self._forget()

    # -- async: the same without blocking the event loop -------------------------

    async def ainfo(self) -> CollectionInfo | None:
        if self._info is None:
            try:
                self._info = await self.async_client.get_collection(self.name)
            except NotFoundError:
                return None
        return self._info

    async def aupsert(self, documents: Sequence[DocumentLike], create: Mapping[str, Any], *, wait: bool,
                      batch_size: int) -> None:
        if not self._ready:
            await self.async_client.create_collection(self.name, exist_ok=True, **create)
            self._ready = True
        self.last_seq = (await self.async_client.upsert(self.name, documents, wait=wait, batch_size=batch_size)).seq

    async def asearch(self, **args: Any) -> list[Hit]:
        with _unless_missing():
            return (await self.async_client.search(self.name, **args)).hits
        return []

    async def adelete(self, ids: Sequence[str] | None = None, *, filter: Mapping[str, Any] | None = None) -> None:
        if ids is None and filter is None:
            return
        with _unless_missing():
            seq = (await self.async_client.delete(self.name, ids, filter=filter)).seq
            self.last_seq = seq if seq is not None else self.last_seq

    async def aget(self, ids: Sequence[str]) -> list[Document]:
        out = []
        for id in ids:
            with suppress(NotFoundError):
                out.append(await self.async_client.get(self.name, id))
        return out

    async def adrop(self) -> None:
        await self.async_client.delete_collection(self.name, missing_ok=True)
        self._forget()
