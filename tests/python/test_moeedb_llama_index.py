"""moeedb.llama_index against the session's server: MoeedbEmbedding and
MoeedbVectorStore on their own and under a VectorStoreIndex (the paraphrase
ranks first), LlamaIndex filters translated to moeedb's, deletes by document,
id and filter, per-query alpha with the score parts, hybrid and text modes,
read-your-writes, async."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from llama_index.core import Document as LlamaDocument
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.schema import MetadataMode, NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)

from conftest import DOCS, PARAPHRASES, Server
from moeedb.llama_index import MoeedbEmbedding, MoeedbVectorStore, hybrid_weights, to_moeedb_filter


def _nodes(embeddings: list[list[float]] | None = None) -> list[TextNode]:
    """DOCS as nodes (node id = DOCS id), each the only chunk of source document `doc-<id>`."""
    nodes = []
    for n, (key, text, meta) in enumerate(DOCS):
        node = TextNode(id_=key, text=text, metadata=dict(meta),
                        embedding=embeddings[n] if embeddings is not None else None)
        node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=f"doc-{key}")
        nodes.append(node)
    return nodes


@pytest.fixture()
def store(server: Server, collection_name: str) -> Iterator[MoeedbVectorStore]:
    """A store the server embeds for, holding DOCS (nodes without embeddings)."""
    s = MoeedbVectorStore(collection_name, server.base, server.api_key)
    assert s.add(_nodes()) == [key for key, _, _ in DOCS]
    try:
        yield s
    finally:
        s.clear()


def _ids(store: MoeedbVectorStore, filters: MetadataFilters | None = None, **kwargs: Any) -> set[str]:
    q = VectorStoreQuery(query_str="some question", similarity_top_k=20, filters=filters)
    return set(store.query(q, **kwargs).ids or [])


def test_embedding(server: Server) -> None:
    emb = MoeedbEmbedding(server.base, server.api_key, embed_batch_size=4)
    q = emb.get_query_embedding(PARAPHRASES[0][0])
    batch = emb.get_text_embedding_batch([t for _, t, _ in DOCS])
    assert len(batch) == len(DOCS) and all(len(v) == len(q) for v in batch)
    sims = [sum(a * b for a, b in zip(q, v)) for v in batch]
    assert DOCS[sims.index(max(sims))][0] == PARAPHRASES[0][1]
    assert "api_key" not in emb.to_dict() and emb.to_dict()["url"] == server.base


def test_paraphrase_ranks_first_through_an_index(server: Server, collection_name: str) -> None:
    store = MoeedbVectorStore(collection_name, server.base, server.api_key)
    embed_model = MoeedbEmbedding(server.base, server.api_key)
    documents = [LlamaDocument(text=t, metadata=m, doc_id=k) for k, t, m in DOCS]
    index = VectorStoreIndex.from_documents(documents, storage_context=StorageContext.from_defaults(vector_store=store),
                                            embed_model=embed_model)
    try:
        # The nodes came with moeedb's fused vectors: the collection takes them as such.
        assert store.client.get_collection(collection_name).kind == "fused"
        retriever = index.as_retriever(similarity_top_k=2)
        for query, want in PARAPHRASES:
            top = retriever.retrieve(query)[0]
            assert top.node.ref_doc_id == want and top.node.metadata["topic"] == dict(
                (k, m) for k, _, m in DOCS)[want]["topic"]
        filtered = index.as_retriever(similarity_top_k=5, filters=MetadataFilters(filters=[
            MetadataFilter(key="topic", value="banking")])).retrieve(PARAPHRASES[1][0])
        assert {n.node.ref_doc_id for n in filtered} == {"bank1", "bank4"}
        index.delete_ref_doc("bank1")
        assert "bank1" not in {n.node.ref_doc_id for n in retriever.retrieve(PARAPHRASES[0][0])}
    finally:
        store.clear()


def test_query_by_text_and_by_embedding(server: Server, store: MoeedbVectorStore) -> None:
    emb = MoeedbEmbedding(server.base, server.api_key)
    for query, want in PARAPHRASES:
        by_text = store.query(VectorStoreQuery(query_str=query, similarity_top_k=3))
        by_vector = store.query(VectorStoreQuery(query_embedding=emb.get_query_embedding(query), similarity_top_k=3))
        assert by_text.ids is not None and by_text.ids[0] == want
        assert by_vector.ids == by_text.ids
        assert by_vector.similarities == pytest.approx(by_text.similarities, abs=1e-4)
    node = store.query(VectorStoreQuery(query_str=PARAPHRASES[0][0], similarity_top_k=1)).nodes[0]  # type: ignore[index]
    assert node.get_content() == DOCS[1][1] and node.ref_doc_id == "doc-bank1"
    assert {k: v for k, v in node.metadata.items() if k != "_moeedb"} == DOCS[1][2]
    assert "_moeedb" in node.metadata  # hidden from the LLM and the embedder
    assert "_moeedb" not in node.get_metadata_str(MetadataMode.LLM) + node.get_metadata_str(MetadataMode.EMBED)


def test_filters_keep_exactly_what_they_should(store: MoeedbVectorStore) -> None:
    def f(key: str, value: Any, op: FilterOperator = FilterOperator.EQ) -> MetadataFilter:
        return MetadataFilter(key=key, value=value, operator=op)

    assert _ids(store) == {k for k, _, _ in DOCS}
    assert _ids(store, MetadataFilters(filters=[f("topic", "banking")])) == {"bank1", "bank4"}
    assert _ids(store, MetadataFilters(filters=[f("year", 2023, FilterOperator.GTE),
                                                f("topic", "banking", FilterOperator.NE)])) == {"travel1", "tech7"}
    assert _ids(store, MetadataFilters(filters=[f("topic", ["music", "tech"], FilterOperator.IN)])) == {
        "music1", "tech7"}
    assert _ids(store, MetadataFilters(filters=[f("year", 2021), f("topic", "travel")],
                                       condition=FilterCondition.OR)) == {"animal1", "music1", "travel1"}
    assert _ids(store, MetadataFilters(filters=[f("year", 2021), f("topic", "banking")],
                                       condition=FilterCondition.NOT)) == {"travel1", "tech7"}
    nested = MetadataFilters(filters=[f("year", 2022, FilterOperator.GT), MetadataFilters(
        filters=[f("topic", "banking"), f("topic", "tech")], condition=FilterCondition.OR)])
    assert _ids(store, nested) == {"bank4", "tech7"}
    assert _ids(store, MetadataFilters(filters=[f("topic", "app", FilterOperator.TEXT_MATCH)])) == set()
    assert _ids(store, MetadataFilters(filters=[f("topic", "ank", FilterOperator.TEXT_MATCH)])) == {"bank1", "bank4"}
    assert _ids(store, MetadataFilters(filters=[f("missing", None, FilterOperator.IS_EMPTY)])) == {
        k for k, _, _ in DOCS}
    # doc_ids / node_ids narrow the same way, and a raw moeedb filter is ANDed.
    q = VectorStoreQuery(query_str="x", similarity_top_k=20, doc_ids=["doc-bank1", "doc-tech7"])
    assert set(store.query(q).ids or []) == {"bank1", "tech7"}
    q = VectorStoreQuery(query_str="x", similarity_top_k=20, node_ids=["music1", "bank4", "none"])
    assert set(store.query(q, filter={"year": 2021}).ids or []) == {"music1"}
    with pytest.raises(ValueError, match="text_match_insensitive"):
        to_moeedb_filter(MetadataFilters(filters=[f("topic", "A", FilterOperator.TEXT_MATCH_INSENSITIVE)]))
    with pytest.raises(TypeError, match="fliter"):
        store.query(VectorStoreQuery(query_str="x"), fliter={})


def test_deletes_and_get_nodes(store: MoeedbVectorStore) -> None:
    store.delete("doc-bank1")
    assert "bank1" not in _ids(store)
    store.delete_nodes(["music1", "not-there"])
    store.delete_nodes(filters=MetadataFilters(filters=[MetadataFilter(key="topic", value="travel")]))
    store.delete_nodes(filters=MetadataFilters(filters=[]))  # no filter: deletes nothing
    left = {"animal1", "tech7", "bank4"}
    assert _ids(store, min_seq=store.last_seq) == left
    assert store.client.count(store.collection_name) == 3
    assert {n.node_id for n in store.get_nodes(["tech7", "bank1", "bank4"])} == {"tech7", "bank4"}
    got = store.get_nodes(filters=MetadataFilters(filters=[MetadataFilter(key="year", value=2024)]))
    assert [(n.node_id, n.get_content()) for n in got] == [("tech7", DOCS[3][1])]
    # Ids and filters together: the ids that match.
    store.delete_nodes(["tech7", "animal1"], filters=MetadataFilters(filters=[MetadataFilter(key="year", value=2024)]))
    assert {n.node_id for n in store.get_nodes(["tech7", "animal1", "bank4"])} == {"animal1", "bank4"}


def test_alpha_per_query_changes_scores(store: MoeedbVectorStore) -> None:
    query = VectorStoreQuery(query_str=PARAPHRASES[3][0], similarity_top_k=len(DOCS))
    seen = []
    for alpha in (0.0, 0.5, 2.0):
        result = store.query(query, alpha=alpha)
        assert result.nodes is not None and result.similarities is not None
        for node, score in zip(result.nodes, result.similarities):
            parts = node.metadata["_moeedb"]
            assert score == pytest.approx(parts["score_hs"] + alpha * parts["score_rw"], abs=1e-5)
            assert parts["parts"]["rw"] == pytest.approx(alpha * parts["score_rw"], abs=1e-5)
        seen.append(dict(zip(result.ids or [], result.similarities)))
    assert seen[0] != seen[2]


def test_hybrid_and_text_search(store: MoeedbVectorStore) -> None:
    collection_alpha = store.client.get_collection(store.collection_name).alpha
    for a in (0.0, 0.3, 1.0):
        q = VectorStoreQuery(query_str="a guitar player", similarity_top_k=4, mode=VectorStoreQueryMode.HYBRID,
                             alpha=a)
        result = store.query(q)
        assert result.nodes and result.similarities and result.ids
        w = hybrid_weights(a, collection_alpha)
        for node, score in zip(result.nodes, result.similarities):
            parts = node.metadata["_moeedb"]["parts"]
            assert score == pytest.approx(parts["hs"] + parts["rw"] + parts["lex"], abs=1e-6)
            if a == 1.0:
                assert parts["lex"] == 0.0
            if a == 0.0:
                assert parts["hs"] == parts["rw"] == 0.0
        assert result.ids[0] == "music1"
        if a < 1.0:  # music1 is first lexically: rrf gives it beta / (60 + 1)
            assert result.nodes[0].metadata["_moeedb"]["parts"]["lex"] == pytest.approx(w["beta"] / 61.0, rel=1e-4)
    # Explicit moeedb weights win over the mapping; no alpha: the server's defaults (beta 16).
    q = VectorStoreQuery(query_str="a guitar player", similarity_top_k=2, mode=VectorStoreQueryMode.HYBRID)
    top = store.query(q, beta=3.0).nodes[0]  # type: ignore[index]
    assert top.metadata["_moeedb"]["parts"]["lex"] == pytest.approx(3.0 / 61.0, rel=1e-4)
    text = store.query(VectorStoreQuery(query_str="airport", similarity_top_k=5, mode=VectorStoreQueryMode.TEXT_SEARCH))
    assert text.ids == ["travel1"]
    with pytest.raises(NotImplementedError, match="svm"):
        store.query(VectorStoreQuery(query_str="x", mode=VectorStoreQueryMode.SVM))


def test_client_vectors_of_another_size(server: Server, collection_name: str) -> None:
    vectors = [[1.0 if i == n else 0.0 for i in range(8)] for n in range(len(DOCS))]
    store = MoeedbVectorStore(collection_name, server.base, server.api_key)
    try:
        store.add(_nodes(vectors))
        info = store.client.get_collection(collection_name)
        assert (info.kind, info.vector_size, info.distance) == ("plain", 8, "Cosine")
        result = store.query(VectorStoreQuery(query_embedding=vectors[2], similarity_top_k=2))
        assert result.ids is not None and result.ids[0] == DOCS[2][0]
        assert result.similarities is not None and result.similarities[0] == pytest.approx(1.0, abs=1e-6)
        hybrid = store.query(VectorStoreQuery(query_embedding=vectors[2], query_str="plane airport", alpha=0.5,
                                              similarity_top_k=2, mode=VectorStoreQueryMode.HYBRID))
        assert hybrid.nodes and hybrid.ids and hybrid.ids[0] == DOCS[2][0]
        # No RW signal in a plain collection: half the weight dense (w_hs 0.5), half lexical (beta 0.5).
        assert hybrid.nodes[0].metadata["_moeedb"]["parts"] == pytest.approx(
            {"hs": 0.5 / 61, "rw": 0.0, "lex": 0.5 / 61}, rel=1e-4)
        store.delete(f"doc-{DOCS[2][0]}")  # by source document: an exact filtered scan of the plain vectors
        assert store.client.count(collection_name) == len(DOCS) - 1
    finally:
        store.clear()


@pytest.mark.asyncio
async def test_async_add_query_delete(server: Server, collection_name: str) -> None:
    store = MoeedbVectorStore(collection_name, server.base, server.api_key, wait=False)
    try:
        assert await store.async_add(_nodes()) == [k for k, _, _ in DOCS]
        assert store.last_seq is not None
        for query, want in PARAPHRASES:
            result = await store.aquery(VectorStoreQuery(query_str=query, similarity_top_k=2), min_seq=store.last_seq)
            assert result.ids is not None and result.ids[0] == want
        await store.adelete("doc-tech7")
        await store.adelete_nodes(filters=MetadataFilters(filters=[MetadataFilter(key="topic", value="banking")]))
        got = await store.aget_nodes(filters=MetadataFilters(filters=[MetadataFilter(
            key="year", value=2021, operator=FilterOperator.GTE)]))
        assert {n.node_id for n in got} == {"animal1", "travel1", "music1"}
        hybrid = await store.aquery(VectorStoreQuery(query_str="airplane runway", similarity_top_k=3,
                                                     mode=VectorStoreQueryMode.HYBRID, alpha=0.5))
        assert hybrid.ids is not None and hybrid.ids[0] == "travel1"
    finally:
        await store.aclear()
    empty = await store.aquery(VectorStoreQuery(query_str="anything", similarity_top_k=2))
    assert empty.ids == []
    await store.adelete("doc-tech7")  # no collection: nothing to delete
    store.delete_nodes(["music1"])
    assert store.get_nodes(["music1"]) == [] and store.client.collection_exists(collection_name) is False
