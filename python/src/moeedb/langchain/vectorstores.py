"""`MoeedbVectorStore`: a LangChain vector store over one moeedb collection."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore
from typing_extensions import Self

from moeedb import mmr
from moeedb._integration import StoreCollection, clients, create_options, score_parts, search_options
from moeedb.async_client import AsyncClient
from moeedb.client import Client
from moeedb.collection import CollectionInfo, Distance
from moeedb.document import Document as MoeedbDocument
from moeedb.langchain.embeddings import MoeedbEmbeddings
from moeedb.relevance import ScoreScale
from moeedb.search import Hit

__all__ = ["MoeedbVectorStore", "SCORE_PARTS_KEY"]

# The metadata key under which `*_with_score` results carry moeedb's score parts.
SCORE_PARTS_KEY = "_moeedb"


class MoeedbVectorStore(VectorStore):
    """A LangChain `VectorStore` over the moeedb collection `collection_name`.

    With `embedding=None` (or a `MoeedbEmbeddings`) documents go as text and the
    server embeds them (fused HS + RW, with a lexical index), and queries go as
    text. With any other `Embeddings` the vectors are computed here and the
    collection holds them (`vector_size` of the first batch, `distance`).

    The collection is created at the first write when missing
    (`collection_options`: `alpha`, `lexical`, `index`, `shards`, ... as
    `Client.create_collection` takes them); searching one that does not exist
    finds nothing. The search methods take moeedb's own arguments: `filter` (a
    moeedb metadata filter dict), `alpha`, `mode` (fused, hs, rw, lexical, hybrid),
    `beta`, `min_seq` (pass `store.last_seq` to read your writes), `exact`,
    `partial`, `w_hs`, `fusion`, `norm`, `rrf_k`, `using`.

    `similarity_search` returns documents exactly as stored. The `*_with_score`
    methods add the hit's scores to a copy of each document's metadata under
    `score_parts_key` (default `_moeedb`): `{"score", "score_hs", "score_rw",
    "score_lex", "parts": {"hs", "rw", "lex"}}` (and `distance` in Euclid
    collections); a document whose own metadata has that key keeps its value.
    """

    def __init__(
        self,
        collection_name: str,
        embedding: Embeddings | None = None,
        *,
        url: str | None = None,
        api_key: str | None = None,
        client: Client | None = None,
        async_client: AsyncClient | None = None,
        distance: Distance = "Cosine",
        collection_options: Mapping[str, Any] | None = None,
        score_parts_key: str | None = SCORE_PARTS_KEY,
        wait: bool = True,
        timeout: float | None = 60.0,
        max_retries: int = 3,
    ) -> None:
        self.collection_name = collection_name
        self._embedding = embedding
        self.distance: Distance = distance
        self.collection_options = dict(collection_options or {})
        self.score_parts_key = score_parts_key
        self.wait = wait
        client, async_client = clients(url, api_key, timeout, max_retries, client, async_client)
        self._collection = StoreCollection(collection_name, client, async_client)

    # -- properties --------------------------------------------------------

    @property
    def embeddings(self) -> Embeddings | None:
        """The embeddings given (None when the server embeds with its own model)."""
        return self._embedding

    @property
    def server_embeds(self) -> bool:
        """Whether texts go to the server to be embedded (no embeddings, or moeedb's)."""
        return self._embedding is None or isinstance(self._embedding, MoeedbEmbeddings)

    @property
    def client(self) -> Client:
        """The synchronous moeedb client this store uses."""
        return self._collection.client

    @property
    def async_client(self) -> AsyncClient:
        """The asyncio moeedb client this store uses."""
        return self._collection.async_client

    @property
    def last_seq(self) -> int | None:
        """The change-log number of this store's last write: a search's `min_seq`."""
        return self._collection.last_seq

    @last_seq.setter
    def last_seq(self, value: int | None) -> None:
        self._collection.last_seq = value

    # -- shared pieces -----------------------------------------------------

    def _client_embedding(self) -> Embeddings:
        assert self._embedding is not None
        return self._embedding

    @staticmethod
    def _prepare(texts: Iterable[str], metadatas: list[dict[str, Any]] | None, ids: Sequence[str | None] | None,
                 kwargs: Mapping[str, Any]) -> tuple[list[str], list[dict[str, Any]], list[str]]:
        if kwargs:
            raise TypeError(f"unknown argument(s) {sorted(kwargs)}")
        texts_ = list(texts)
        if metadatas is not None and len(metadatas) != len(texts_):
            raise ValueError(f"got {len(metadatas)} metadatas for {len(texts_)} texts")
        if ids is not None and len(ids) != len(texts_):
            raise ValueError(f"got {len(ids)} ids for {len(texts_)} texts")
        metas = [dict(m) if m else {} for m in metadatas] if metadatas is not None else [{} for _ in texts_]
        ids_ = [i if i else str(uuid.uuid4()) for i in ids] if ids is not None else [
            str(uuid.uuid4()) for _ in texts_]
        return texts_, metas, ids_

    def _create_options(self, vectors: list[list[float]] | None) -> dict[str, Any]:
        return create_options(self.collection_options, len(vectors[0]) if vectors else None, self.distance)

    @staticmethod
    def _payload(texts: list[str], metas: list[dict[str, Any]], ids: list[str],
                 vectors: list[list[float]] | None) -> list[MoeedbDocument]:
        return [MoeedbDocument(id=i, text=t, metadata=m, vector=vectors[n] if vectors is not None else None)
                for n, (i, t, m) in enumerate(zip(ids, texts, metas))]

    def _plan(self, query: str | None, vector: list[float] | None,
              options: Mapping[str, Any]) -> tuple[str | None, list[float] | None, bool]:
        """(text sent, vector sent, whether the query must be embedded here first)."""
        mode = options.get("mode")
        if mode == "lexical":
            if query is None:
                raise ValueError("a lexical search needs a query text")
            return query, None, False  # the lexical index runs no model (a vector would override the mode)
        if vector is not None:
            return (query if mode == "hybrid" else None), vector, False
        if self.server_embeds:
            return query, None, False
        return (query if mode == "hybrid" else None), None, True

    def _document(self, hit: Hit, with_scores: bool) -> Document:
        metadata = dict(hit.metadata)
        key = self.score_parts_key
        if with_scores and key and key not in metadata:
            scores = score_parts(hit)
            if hit.distance is not None:
                scores["distance"] = hit.distance
            metadata[key] = scores
        return Document(id=hit.id, page_content=hit.text, metadata=metadata)

    @staticmethod
    def _stored(d: MoeedbDocument) -> Document:
        return Document(id=d.id, page_content=d.text or "", metadata=d.metadata or {})

    @staticmethod
    def _to_delete(ids: list[str] | None, kwargs: Mapping[str, Any], drop_all: str) -> list[str]:
        if kwargs:
            raise TypeError(f"unknown argument(s) {sorted(kwargs)}")
        if ids is None:
            raise ValueError(f"give the ids to delete ({drop_all}() drops everything)")
        return ids

    def _scale(self, info: CollectionInfo | None, options: Mapping[str, Any]) -> ScoreScale:
        plain = info.kind == "plain" if info is not None else not self.server_embeds
        alpha = options.get("alpha", info.alpha if info is not None else 1.0)
        return ScoreScale(plain=plain, distance=info.distance if info is not None else self.distance,
                          mode=options.get("mode"), alpha=float(alpha), w_hs=options.get("w_hs"),
                          beta=options.get("beta"), fusion=options.get("fusion"), rrf_k=options.get("rrf_k"))

    def _similarity(self, info: CollectionInfo, options: Mapping[str, Any]) -> mmr.Similarity:
        if info.kind == "plain":
            return mmr.similarity_for(info.distance)
        dim_hs, mode = info.dim_hs, options.get("mode")
        if mode == "hs":
            return mmr.fused_similarity(dim_hs, 0.0)
        if mode == "rw":
            return lambda a, b: mmr.dot(a[dim_hs:], b[dim_hs:])
        return mmr.fused_similarity(dim_hs, float(options.get("alpha", info.alpha)))

    @staticmethod
    def _pick(hits: list[Hit], query_vector: list[float], vectors: list[list[float]], similarity: mmr.Similarity,
              k: int, lambda_mult: float) -> list[Document]:
        relevance = [similarity(query_vector, v) for v in vectors]
        order = mmr.maximal_marginal_relevance(relevance, vectors, similarity, k=k, lambda_mult=lambda_mult)
        return [Document(id=hits[i].id, page_content=hits[i].text, metadata=dict(hits[i].metadata)) for i in order]

    # -- sync: writes ----------------------------------------------------------

    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        batch_size: int = 1000,
        **kwargs: Any,
    ) -> list[str]:
        """Embed (here or on the server) and upsert `texts`; their ids, given or uuid4.

        An existing id is replaced. Batches of `batch_size` are separate atomic writes.
        """
        texts_, metas, ids_ = self._prepare(texts, metadatas, ids, kwargs)
        if not texts_:
            return []
        vectors = None if self.server_embeds else self._client_embedding().embed_documents(texts_)
        self._collection.upsert(self._payload(texts_, metas, ids_, vectors), self._create_options(vectors),
                                wait=self.wait, batch_size=batch_size)
        return ids_

    def add_documents(self, documents: list[Document], **kwargs: Any) -> list[str]:
        """Upsert LangChain documents, keeping their `id` (or `ids=`), else uuid4 ids."""
        ids = kwargs.pop("ids", None)
        if ids is None:
            ids = [d.id for d in documents]
        return self.add_texts([d.page_content for d in documents], [d.metadata for d in documents],
                              ids=ids, **kwargs)

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """Delete documents by id (ids that do not exist are ignored); True when done.

        `ids=None` deletes nothing and raises ValueError: call `delete_collection()`.
        """
        self._collection.delete(self._to_delete(ids, kwargs, "delete_collection"))
        return True

    def delete_collection(self) -> None:
        """Drop the whole collection (it is created again at the next write)."""
        self._collection.drop()

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The stored documents with these ids, in order; missing ids are left out."""
        return [self._stored(d) for d in self._collection.get(ids)]

    # -- sync: searches --------------------------------------------------------

    def _hits(self, query: str | None, vector: list[float] | None, k: int, options: dict[str, Any]) -> list[Hit]:
        text, vec, embed_here = self._plan(query, vector, options)
        if embed_here:
            assert query is not None
            vec = self._client_embedding().embed_query(query)
        return self._collection.search(query=text, vector=vec, k=k, **options)

    def similarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        """The `k` documents nearest to `query`, best first, as stored."""
        return [self._document(h, False) for h in self._hits(query, None, k, search_options(kwargs))]

    def similarity_search_with_score(self, query: str, k: int = 4, **kwargs: Any) -> list[tuple[Document, float]]:
        """The `k` best documents with moeedb's score (higher is better); the score parts
        are in each document's metadata under `score_parts_key`."""
        return [(self._document(h, True), h.score) for h in self._hits(query, None, k, search_options(kwargs))]

    def similarity_search_by_vector(self, embedding: list[float], k: int = 4, **kwargs: Any) -> list[Document]:
        """The `k` documents nearest to a vector of this store's embeddings (for a
        server-embedded store: moeedb's fused vector from `MoeedbEmbeddings`)."""
        return [self._document(h, False) for h in self._hits(None, embedding, k, search_options(kwargs))]

    def similarity_search_with_score_by_vector(self, embedding: list[float], k: int = 4,
                                               **kwargs: Any) -> list[tuple[Document, float]]:
        """`similarity_search_with_score` from a vector."""
        return [(self._document(h, True), h.score) for h in self._hits(None, embedding, k, search_options(kwargs))]

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        """Relevance in [0, 1] of a default search's score (moeedb.relevance explains the
        mapping; the search methods use the query's own alpha and mode instead)."""
        scale = self._scale(self._collection.info(), {})
        if scale.plain and scale.distance == "Euclid":
            raise NotImplementedError("a Euclid collection's relevance needs the hit's distance: "
                                      "use similarity_search_with_relevance_scores")
        return lambda score: scale.relevance(Hit(id="", score=score))

    def _similarity_search_with_relevance_scores(self, query: str, k: int = 4,
                                                 **kwargs: Any) -> list[tuple[Document, float]]:
        options = search_options(kwargs)
        hits = self._hits(query, None, k, options)
        scale = self._scale(self._collection.info(), options)
        return [(self._document(h, True), scale.relevance(h)) for h in hits]

    def max_marginal_relevance_search(self, query: str, k: int = 4, fetch_k: int = 20, lambda_mult: float = 0.5,
                                      **kwargs: Any) -> list[Document]:
        """MMR over the `fetch_k` best candidates, computed here: the API returns no
        stored vectors, so the candidates' texts are embedded again (by the server,
        or by this store's embeddings) and compared with the collection's similarity."""
        options = search_options(kwargs)
        if self.server_embeds:
            hits = self._hits(query, None, fetch_k, options)
            if not hits:
                return []
            vectors = self.client.embed([query] + [h.text for h in hits])
            query_vector, vectors = vectors[0], vectors[1:]
        else:
            query_vector = self._client_embedding().embed_query(query)
            hits = self._hits(query, query_vector, fetch_k, options)
            if not hits:
                return []
            vectors = self._client_embedding().embed_documents([h.text for h in hits])
        info = self._collection.info()
        assert info is not None
        return self._pick(hits, query_vector, vectors, self._similarity(info, options), k, lambda_mult)

    def max_marginal_relevance_search_by_vector(self, embedding: list[float], k: int = 4, fetch_k: int = 20,
                                                lambda_mult: float = 0.5, **kwargs: Any) -> list[Document]:
        """MMR from a query vector (candidates re-embedded as in `max_marginal_relevance_search`)."""
        options = search_options(kwargs)
        hits = self._hits(None, embedding, fetch_k, options)
        if not hits:
            return []
        texts = [h.text for h in hits]
        vectors = (self.client.embed(texts) if self.server_embeds
                   else self._client_embedding().embed_documents(texts))
        info = self._collection.info()
        assert info is not None
        return self._pick(hits, embedding, vectors, self._similarity(info, options), k, lambda_mult)

    # -- async: writes ---------------------------------------------------------

    async def aadd_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        batch_size: int = 1000,
        **kwargs: Any,
    ) -> list[str]:
        """`add_texts` without blocking the event loop."""
        texts_, metas, ids_ = self._prepare(texts, metadatas, ids, kwargs)
        if not texts_:
            return []
        vectors = None if self.server_embeds else await self._client_embedding().aembed_documents(texts_)
        await self._collection.aupsert(self._payload(texts_, metas, ids_, vectors), self._create_options(vectors),
                                       wait=self.wait, batch_size=batch_size)
        return ids_

    async def aadd_documents(self, documents: list[Document], **kwargs: Any) -> list[str]:
        """`add_documents` without blocking the event loop."""
        ids = kwargs.pop("ids", None)
        if ids is None:
            ids = [d.id for d in documents]
        return await self.aadd_texts([d.page_content for d in documents], [d.metadata for d in documents],
                                     ids=ids, **kwargs)

    async def adelete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """`delete` without blocking the event loop."""
        await self._collection.adelete(self._to_delete(ids, kwargs, "adelete_collection"))
        return True

    async def adelete_collection(self) -> None:
        """`delete_collection` without blocking the event loop."""
        await self._collection.adrop()

    async def aget_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """`get_by_ids` without blocking the event loop."""
        return [self._stored(d) for d in await self._collection.aget(ids)]

    # -- async: searches -------------------------------------------------------

    async def _ahits(self, query: str | None, vector: list[float] | None, k: int,
                     options: dict[str, Any]) -> list[Hit]:
        text, vec, embed_here = self._plan(query, vector, options)
        if embed_here:
            assert query is not None
            vec = await self._client_embedding().aembed_query(query)
        return await self._collection.asearch(query=text, vector=vec, k=k, **options)

    async def asimilarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        """`similarity_search` without blocking the event loop."""
        return [self._document(h, False) for h in await self._ahits(query, None, k, search_options(kwargs))]

    async def asimilarity_search_with_score(self, query: str, k: int = 4,
                                            **kwargs: Any) -> list[tuple[Document, float]]:
        """`similarity_search_with_score` without blocking the event loop."""
        hits = await self._ahits(query, None, k, search_options(kwargs))
        return [(self._document(h, True), h.score) for h in hits]

    async def asimilarity_search_by_vector(self, embedding: list[float], k: int = 4,
                                           **kwargs: Any) -> list[Document]:
        """`similarity_search_by_vector` without blocking the event loop."""
        return [self._document(h, False) for h in await self._ahits(None, embedding, k, search_options(kwargs))]

    async def _asimilarity_search_with_relevance_scores(self, query: str, k: int = 4,
                                                        **kwargs: Any) -> list[tuple[Document, float]]:
        options = search_options(kwargs)
        hits = await self._ahits(query, None, k, options)
        scale = self._scale(await self._collection.ainfo(), options)
        return [(self._document(h, True), scale.relevance(h)) for h in hits]

    async def amax_marginal_relevance_search(self, query: str, k: int = 4, fetch_k: int = 20,
                                             lambda_mult: float = 0.5, **kwargs: Any) -> list[Document]:
        """`max_marginal_relevance_search` without blocking the event loop."""
        options = search_options(kwargs)
        if self.server_embeds:
            hits = await self._ahits(query, None, fetch_k, options)
            if not hits:
                return []
            vectors = await self.async_client.embed([query] + [h.text for h in hits])
            query_vector, vectors = vectors[0], vectors[1:]
        else:
            query_vector = await self._client_embedding().aembed_query(query)
            hits = await self._ahits(query, query_vector, fetch_k, options)
            if not hits:
                return []
            vectors = await self._client_embedding().aembed_documents([h.text for h in hits])
        info = await self._collection.ainfo()
        assert info is not None
        return self._pick(hits, query_vector, vectors, self._similarity(info, options), k, lambda_mult)

    async def amax_marginal_relevance_search_by_vector(self, embedding: list[float], k: int = 4, fetch_k: int = 20,
                                                       lambda_mult: float = 0.5, **kwargs: Any) -> list[Document]:
        """`max_marginal_relevance_search_by_vector` without blocking the event loop."""
        options = search_options(kwargs)
        hits = await self._ahits(None, embedding, fetch_k, options)
        if not hits:
            return []
        texts = [h.text for h in hits]
        vectors = (await self.async_client.embed(texts) if self.server_embeds
                   else await self._client_embedding().aembed_documents(texts))
        info = await self._collection.ainfo()
        assert info is not None
        return self._pick(hits, embedding, vectors, self._similarity(info, options), k, lambda_mult)

    # -- constructors ------------------------------------------------------------

    @classmethod
    def _named(cls, collection_name: str | None, embedding: Embeddings | None, kwargs: dict[str, Any]) -> Self:
        return cls(collection_name or f"langchain_{uuid.uuid4().hex}", embedding, **kwargs)

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings | None = None,
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        collection_name: str | None = None,
        **kwargs: Any,
    ) -> Self:
        """A store over `collection_name` (default: a new `langchain_<uuid>` name)
        holding `texts`; other keyword arguments go to the constructor."""
        store = cls._named(collection_name, embedding, kwargs)
        store.add_texts(texts, metadatas, ids=ids)
        return store

    @classmethod
    async def afrom_texts(cls, texts: list[str], embedding: Embeddings | None = None,
                          metadatas: list[dict[str, Any]] | None = None, *, ids: list[str] | None = None,
                          **kwargs: Any) -> Self:
        """`from_texts` (its arguments, `collection_name` among the keywords) without
        blocking the event loop."""
        store = cls._named(kwargs.pop("collection_name", None), embedding, kwargs)
        await store.aadd_texts(texts, metadatas, ids=ids)
        return store
