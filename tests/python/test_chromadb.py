"""The chromadb client over moeedb's Chroma port, unmodified: a collection
of moeedb's fused vectors (embeddings given by the client), queried with
where and where_document filters, read back, counted, updated, deleted."""

from __future__ import annotations

import chromadb

from conftest import DOCS, PARAPHRASES, Server
from e2e_util import embed


def test_chromadb_client(server: Server, collection_name: str) -> None:
    client = chromadb.HttpClient(host="127.0.0.1", port=server.chroma_port, headers={"x-chroma-token": server.api_key})
    assert client.heartbeat() > 0
    name = collection_name.replace("_", "-")
    notes = client.get_or_create_collection(name, embedding_function=None, metadata={"hnsw:space": "cosine"})
    vectors = embed(server, [text for _, text, _ in DOCS])
    notes.add(ids=[k for k, _, _ in DOCS], embeddings=vectors, documents=[t for _, t, _ in DOCS],
              metadatas=[m for _, _, m in DOCS])
    assert notes.count() == len(DOCS)
    queries = embed(server, [text for text, _ in PARAPHRASES])
    res = notes.query(query_embeddings=queries, n_results=2)
    assert [ids[0] for ids in res["ids"]] == [want for _, want in PARAPHRASES]
    banking = notes.query(query_embeddings=queries[:1], n_results=10, where={"topic": "banking"})
    assert sorted(banking["ids"][0]) == ["bank1", "bank4"]
    texts = notes.get(where_document={"$contains": "card"})
    assert sorted(texts["ids"]) == ["bank1", "bank4"]
    recent = notes.get(where={"$and": [{"year": {"$gte": 2023}}, {"topic": {"$ne": "tech"}}]})
    assert sorted(recent["ids"]) == ["bank4", "travel1"]
    notes.update(ids=["music1"], metadatas=[{"topic": "music", "year": 2025}])
    assert notes.get(ids=["music1"])["metadatas"][0]["year"] == 2025
    notes.delete(where={"topic": "banking"})
    assert notes.count() == len(DOCS) - 2
    assert notes.get(ids=["bank1"])["ids"] == []
    client.delete_collection(name)
    assert name not in [c.name for c in client.list_collections()]
