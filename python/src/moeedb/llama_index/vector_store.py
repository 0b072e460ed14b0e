"""`MoeedbVectorStore`: a LlamaIndex vector store over one moeedb collection."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.schema import BaseNode, MetadataMode, TextNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
)
from llama_index.core.vector_stores.utils import metadata_dict_to_node, node_to_metadata_dict

from moeedb import _env
from moeedb._integration import StoreCollection, clients, create_options, score_parts, search_options
from moeedb.async_client import AsyncClient
from moeedb.client import Client
from moeedb.collection import CollectionInfo, Distance
from moeedb.document import Document, Vector
from moeedb.llama_index.filters import all_of, to_moeedb_filter
from moeedb.search import Hit

__all__ = ["MoeedbVectorStore", "hybrid_weights"]

# The most hits one search returns (the server's bound on k).
_MAX_K = 10000


def hybrid_weights(query_alpha: float, collection_alpha: float) -> dict[str, float]:
    """moeedb's hybrid weights for LlamaIndex's hybrid `alpha` (0 lexical only, 1 dense only).

    The dense signals get the share `alpha` of the weight and the lexical signal the
    rest, HS and RW keeping the collection's ratio: `w_hs = alpha`, RW weight
    `alpha * collection_alpha`, `beta = (1 - alpha) * (1 + collection_alpha)`.
    """
    if not 0.0 <= query_alpha <= 1.0:
        raise ValueError(f"a hybrid query's alpha must be in [0, 1], got {query_alpha}")
    a, c = query_alpha, abs(collection_alpha)
    return {"w_hs": a, "alpha": a * c, "beta": (1.0 - a) * (1.0 + c)}


class MoeedbVectorStore(BasePydanticVectorStore):
    """A LlamaIndex vector store over the moeedb collection `collection_name`.

    Nodes are stored with their text (`stores_text`), their metadata (flat, with
    LlamaIndex's `_node_content`) and their embedding when they have one; a node
    without an embedding is embedded by the server from its text (metadata left
    out). A missing collection is created at the first `add`: of the nodes'
    embedding size (`vector_size`, `distance`) when they carry embeddings, else
    one the server embeds for (`collection_options` go to `create_collection`).

    `query` modes: DEFAULT searches the query embedding (or `query_str`, embedded
    by the server); HYBRID and SEMANTIC_HYBRID are moeedb's hybrid search
    (`query_str` for the lexical signal, the embedding if given), with the query's
    `alpha` mapped by `hybrid_weights` (a plain collection's RW weight is 0);
    TEXT_SEARCH and SPARSE are lexical (BM25).
    Keyword arguments of `query` are moeedb's search fields: `alpha` (RW weight),
    `beta`, `w_hs`, `fusion`, `norm`, `rrf_k`, `min_seq`, `exact`, `partial`,
    `filter` (a moeedb filter, ANDed) and `mode`. Each returned node carries its
    scores under `score_parts_key` in its metadata (hidden from the LLM and the
    embedder), unless its own metadata has that key.
    """

    stores_text: bool = True
    flat_metadata: bool = False
    collection_name: str = Field(description="The moeedb collection.")
    url: str = Field(description="The moeedb server's root URL.")
    vector_size: int | None = Field(default=None, description="The size of client vectors (None: from the nodes).")
    distance: Distance = Field(default="Cosine", description="The distance of a client-vector collection.")
    collection_options: dict[str, Any] = Field(default_factory=dict,
                                               description="create_collection's options (alpha, lexical, ...).")
    wait: bool = Field(default=True, description="Sync each write before it is answered.")
    batch_size: int = Field(default=1000, description="Documents per upsert request (at most 1000).")
    score_parts_key: str | None = Field(default="_moeedb", description="Metadata key of the score parts.")

    _collection: StoreCollection = PrivateAttr()

    def __init__(
        self,
        collection_name: str,
        url: str | None = None,
        api_key: str | None = None,
        *,
        client: Client | None = None,
        async_client: AsyncClient | None = None,
        timeout: float | None = 60.0,
        max_retries: int = 3,
        **kwargs: Any,
    ) -> None:
        fields: dict[str, Any] = {"collection_name": collection_name, "url": _env.server_url(url), **kwargs}
        super().__init__(**fields)  # pydantic fields of this class (mypy sees only the base's)
        client, async_client = clients(self.url, api_key, timeout, max_retries, client, async_client)
        self._collection = StoreCollection(self.collection_name, client, async_client)

    @classmethod
    def class_name(cls) -> str:
        """LlamaIndex's name of this component."""
        return "MoeedbVectorStore"

    @property
    def client(self) -> Client:
        """The synchronous moeedb client."""
        return self._collection.client

    @property
    def aclient(self) -> AsyncClient:
        """The asyncio moeedb client."""
        return self._collection.async_client

    @property
    def last_seq(self) -> int | None:
        """The change-log number of this store's last write: pass it as `min_seq`."""
        return self._collection.last_seq

    # -- shared pieces -----------------------------------------------------

    def _documents(self, nodes: Sequence[BaseNode]) -> list[Document]:
        out = []
        for node in nodes:
            metadata = node_to_metadata_dict(node, remove_text=True, flat_metadata=self.flat_metadata)
            out.append(Document(id=node.node_id, text=node.get_content(metadata_mode=MetadataMode.NONE),
                                metadata=metadata, vector=node.embedding))
        return out

    def _create_options(self, nodes: Sequence[BaseNode]) -> dict[str, Any]:
        size = self.vector_size or next((len(n.embedding) for n in nodes if n.embedding), None)
        return create_options(self.collection_options, size, self.distance)

    def _node(self, hit: Hit) -> BaseNode:
        try:
            node = metadata_dict_to_node(hit.metadata, text=hit.text)
        except (ValueError, TypeError, KeyError):  # stored by other means: no LlamaIndex fields
            node = TextNode(id_=hit.id, text=hit.text, metadata=dict(hit.metadata))
        key = self.score_parts_key
        if key and key not in node.metadata:
            node.metadata[key] = score_parts(hit)
            node.excluded_llm_metadata_keys = [*node.excluded_llm_metadata_keys, key]
            node.excluded_embed_metadata_keys = [*node.excluded_embed_metadata_keys, key]
        return node

    def _stored(self, documents: list[Document]) -> list[BaseNode]:
        return [self._node(Hit(id=d.id, score=0.0, text=d.text or "", metadata=d.metadata or {})) for d in documents]

    def _result(self, hits: list[Hit]) -> VectorStoreQueryResult:
        return VectorStoreQueryResult(nodes=[self._node(h) for h in hits], similarities=[h.score for h in hits],
                                      ids=[h.id for h in hits])

    @staticmethod
    def _needs_collection_alpha(query: VectorStoreQuery, options: Mapping[str, Any]) -> bool:
        return (query.mode in (VectorStoreQueryMode.HYBRID, VectorStoreQueryMode.SEMANTIC_HYBRID)
                and query.alpha is not None and "alpha" not in options)

    def _search_args(self, query: VectorStoreQuery, kwargs: Mapping[str, Any],
                     info: CollectionInfo | None) -> dict[str, Any]:
        """moeedb search arguments for a LlamaIndex query (see the class docstring)."""
        options = search_options(kwargs, "query")
        flt = all_of([
            to_moeedb_filter(query.filters) if query.filters is not None else None,
            {"ref_doc_id": {"$in": list(query.doc_ids)}} if query.doc_ids else None,
            {"$id": {"$in": list(query.node_ids)}} if query.node_ids else None,
            options.pop("filter", None),
        ])
        k = query.similarity_top_k
        text: str | None = query.query_str
        vector: Vector | None = query.query_embedding
        mode = query.mode
        if mode == VectorStoreQueryMode.DEFAULT:
            if vector is not None:
                text = None
            elif text is None:
                raise ValueError("the query has neither an embedding nor a query_str")
        elif mode in (VectorStoreQueryMode.HYBRID, VectorStoreQueryMode.SEMANTIC_HYBRID):
            if text is None:
                raise ValueError("a hybrid query needs query_str (the lexical signal)")
            options.setdefault("mode", "hybrid")
            k = query.hybrid_top_k or k
            if query.alpha is not None:
                # The RW weight inside the dense share; a plain collection has no RW signal.
                collection_alpha = float(options["alpha"]) if "alpha" in options else (
                    0.0 if info is None or info.kind == "plain" else info.alpha)
                for key, value in hybrid_weights(query.alpha, collection_alpha).items():
                    options.setdefault(key, value)
        elif mode in (VectorStoreQueryMode.TEXT_SEARCH, VectorStoreQueryMode.SPARSE):
            if text is None:
                raise ValueError("a text search needs query_str")
            options.setdefault("mode", "lexical")
            vector = None  # with a vector the server would search it instead
            k = query.sparse_top_k or k
        else:
            raise NotImplementedError(f"moeedb's store does not implement query mode {mode.value!r}")
        return {"query": text, "vector": vector, "k": min(max(k, 1), _MAX_K), "filter": flt, **options}

    @staticmethod
    def _filter(node_ids: list[str] | None, filters: MetadataFilters | None) -> dict[str, Any] | None:
        """The moeedb filter of `filters` ANDed with the node ids (None when neither narrows)."""
        return all_of([to_moeedb_filter(filters) if filters is not None else None,
                       {"$id": {"$in": node_ids}} if node_ids else None])

    def _to_delete(self, node_ids: list[str] | None, filters: MetadataFilters | None) -> dict[str, Any]:
        """What `delete_nodes` deletes: the ids, or what the filters (and the ids) match;
        {} for nothing (empty filters delete nothing, never everything)."""
        if filters is None:
            return {"ids": node_ids} if node_ids else {}
        flt = self._filter(node_ids, filters)
        return {"filter": flt} if flt is not None else {}

    @staticmethod
    def _scan_args(info: CollectionInfo, flt: dict[str, Any]) -> dict[str, Any]:
        """An exact search that returns every document matching `flt` (up to 10000):
        the API has no filter-only listing, so it ranks them against a basis vector."""
        if info.kind == "plain":
            size = info.vector_size or info.dim_hs
            return {"vector": [1.0] + [0.0] * (size - 1), "k": _MAX_K, "exact": True, "filter": flt}
        return {"vector": {"hs": [1.0] + [0.0] * (info.dim_hs - 1)}, "using": "hs", "k": _MAX_K, "exact": True,
                "filter": flt}

    # -- sync ----------------------------------------------------------------

    def add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> list[str]:
        """Upsert `nodes` (by node id); their ids. Batches are separate atomic writes."""
        if not nodes:
            return []
        self._collection.upsert(self._documents(nodes), self._create_options(nodes), wait=self.wait,
                                batch_size=self.batch_size)
        return [n.node_id for n in nodes]

    def _matching(self, flt: dict[str, Any]) -> list[Hit]:
        info = self._collection.info()
        return self._collection.search(**self._scan_args(info, flt)) if info is not None else []

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Delete every node of the source document `ref_doc_id`."""
        self._collection.delete(filter={"ref_doc_id": ref_doc_id})

    def delete_nodes(self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None,
                     **delete_kwargs: Any) -> None:
        """Delete nodes by id and/or by metadata filters (both given: those matching both)."""
        self._collection.delete(**self._to_delete(node_ids, filters))

    def get_nodes(self, node_ids: list[str] | None = None,
                  filters: MetadataFilters | None = None) -> list[BaseNode]:
        """The stored nodes with these ids and/or matching `filters`."""
        if filters is None and node_ids is not None:
            return self._stored(self._collection.get(node_ids))
        return [self._node(h) for h in self._matching(self._filter(node_ids, filters) or {})]

    def clear(self) -> None:
        """Drop the collection (created again at the next `add`)."""
        self._collection.drop()

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """The `similarity_top_k` best nodes for `query` (modes: see the class docstring)."""
        info = self._collection.info() if self._needs_collection_alpha(query, kwargs) else None
        return self._result(self._collection.search(**self._search_args(query, kwargs, info)))

    # -- async ---------------------------------------------------------------

    async def async_add(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[str]:
        """`add` without blocking the event loop."""
        if not nodes:
            return []
        await self._collection.aupsert(self._documents(nodes), self._create_options(nodes), wait=self.wait,
                                       batch_size=self.batch_size)
        return [n.node_id for n in nodes]

    async def _amatching(self, flt: dict[str, Any]) -> list[Hit]:
        info = await self._collection.ainfo()
        return await self._collection.asearch(**self._scan_args(info, flt)) if info is not None else []

    async def adelete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """`delete` without blocking the event loop."""
        await self._collection.adelete(filter={"ref_doc_id": ref_doc_id})

    async def adelete_nodes(self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None,
                            **delete_kwargs: Any) -> None:
        """`delete_nodes` without blocking the event loop."""
        await self._collection.adelete(**self._to_delete(node_ids, filters))

    async def aget_nodes(self, node_ids: list[str] | None = None,
                         filters: MetadataFilters | None = None) -> list[BaseNode]:
        """`get_nodes` without blocking the event loop."""
        if filters is None and node_ids is not None:
            return self._stored(await self._collection.aget(node_ids))
        return [self._node(h) for h in await self._amatching(self._filter(node_ids, filters) or {})]

    async def aclear(self) -> None:
        """`clear` without blocking the event loop."""
        await self._collection.adrop()

    async def aquery(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """`query` without blocking the event loop."""
        info = await self._collection.ainfo() if self._needs_collection_alpha(query, kwargs) else None
        return self._result(await self._collection.asearch(**self._search_args(query, kwargs, info)))
