"""Haystack's QdrantDocumentStore (qdrant-haystack) over moeedb's Qdrant
port, unmodified: documents written with moeedb's embeddings, retrieved by
QdrantEmbeddingRetriever, filtered, counted and deleted."""

from __future__ import annotations

import pytest
from haystack import Document
from haystack.document_stores.types import DuplicatePolicy
from haystack.utils import Secret
from haystack_integrations.components.retrievers.qdrant import QdrantEmbeddingRetriever
from haystack_integrations.document_stores.qdrant import QdrantDocumentStore

from conftest import DOCS, PARAPHRASES, Server
from e2e_util import embed

pytestmark = pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection")


def test_document_store_write_retrieve_filter_delete(server: Server, collection_name: str) -> None:
    vectors = embed(server, [text for _, text, _ in DOCS])
    store = QdrantDocumentStore(url=server.qdrant, api_key=Secret.from_token(server.api_key), index=collection_name,
                                embedding_dim=len(vectors[0]), similarity="cosine", recreate_index=True,
                                progress_bar=False, timeout=120)
    docs = [Document(content=text, meta={"key": key, **meta}, embedding=v) for v, (key, text, meta) in zip(vectors, DOCS)]
    assert store.write_documents(docs, policy=DuplicatePolicy.OVERWRITE) == len(DOCS)
    assert store.count_documents() == len(DOCS)
    retriever = QdrantEmbeddingRetriever(document_store=store, top_k=2)
    for text, want in PARAPHRASES:
        [q] = embed(server, [text])
        found = retriever.run(query_embedding=q)["documents"]
        assert found[0].meta["key"] == want, text
        assert found[0].content == dict((k, t) for k, t, _ in DOCS)[want]
    banking = {"field": "meta.topic", "operator": "==", "value": "banking"}
    assert sorted(d.meta["key"] for d in store.filter_documents(filters=banking)) == ["bank1", "bank4"]
    recent = {"operator": "AND", "conditions": [{"field": "meta.year", "operator": ">=", "value": 2023},
                                                {"field": "meta.topic", "operator": "!=", "value": "tech"}]}
    assert sorted(d.meta["key"] for d in store.filter_documents(filters=recent)) == ["bank4", "travel1"]
    [q] = embed(server, ["card"])
    kept = retriever.run(query_embedding=q, filters=banking, top_k=10)["documents"]
    assert sorted(d.meta["key"] for d in kept) == ["bank1", "bank4"]
    store.delete_documents([d.id for d in docs[:2]])
    assert store.count_documents() == len(DOCS) - 2
