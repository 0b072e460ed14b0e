"""LangChain's own stores over moeedb, unmodified: langchain-qdrant's
QdrantVectorStore (through moeedb's Qdrant port) and langchain-chroma's
Chroma (through its Chroma port), both embedding with langchain-openai's
OpenAIEmbeddings pointed at moeedb's /v1."""

from __future__ import annotations

import chromadb
import pytest
from langchain_chroma import Chroma
from langchain_core.documents import Document
from langchain_openai import OpenAIEmbeddings
from langchain_qdrant import QdrantVectorStore
from qdrant_client import models

from conftest import DOCS, PARAPHRASES, Server
from e2e_util import api

pytestmark = pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection")


def embeddings(server: Server) -> OpenAIEmbeddings:
    # check_embedding_ctx_length=False: send texts, not tiktoken ids of another model's vocabulary.
    return OpenAIEmbeddings(model=server.model, api_key=server.api_key, base_url=f"{server.base}/v1",
                            check_embedding_ctx_length=False)


def documents() -> list[Document]:
    return [Document(page_content=text, metadata={"key": key, **meta}) for key, text, meta in DOCS]


def test_qdrant_store_from_texts_search_filter_delete(server: Server, collection_name: str) -> None:
    store = QdrantVectorStore.from_documents(documents(), embeddings(server), url=server.qdrant, api_key=server.api_key,
                                             collection_name=collection_name)
    for text, want in PARAPHRASES:
        hits = store.similarity_search_with_score(text, k=3)
        assert hits[0][0].metadata["key"] == want, text
        assert all(-1.0 <= score <= 1.0 for _, score in hits)
    banking = models.Filter(must=[models.FieldCondition(key="metadata.topic", match=models.MatchValue(value="banking"))])
    kept = store.similarity_search("card", k=10, filter=banking)
    assert sorted(d.metadata["key"] for d in kept) == ["bank1", "bank4"]
    # A score-threshold retriever keeps what scores at least the threshold (scores are relevances in [0, 1]).
    scored = store.similarity_search_with_relevance_scores(PARAPHRASES[0][0], k=len(DOCS))
    assert all(0.0 <= s <= 1.0 for _, s in scored)
    threshold = (scored[0][1] + scored[1][1]) / 2
    retriever = store.as_retriever(search_type="similarity_score_threshold",
                                   search_kwargs={"score_threshold": threshold, "k": len(DOCS)})
    assert [d.metadata["key"] for d in retriever.invoke(PARAPHRASES[0][0])] == [PARAPHRASES[0][1]]
    mmr = store.max_marginal_relevance_search(PARAPHRASES[1][0], k=3, fetch_k=6)
    assert mmr[0].metadata["key"] == PARAPHRASES[1][1] and len({d.metadata["key"] for d in mmr}) == 3
    # The text sits under page_content; moeedb's BM25 reads it there.
    lex = api(server, "POST", f"/collections/{collection_name}/search", {"query": "guitar street", "mode": "lexical", "k": 1})
    assert lex.json()["hits"][0]["text"] == DOCS[4][1]
    ids = [d.metadata["_id"] for d in store.similarity_search(PARAPHRASES[0][0], k=2)]
    assert store.delete(ids)
    assert store.client.count(collection_name).count == len(DOCS) - 2
    assert {d.metadata["key"] for d in store.similarity_search(PARAPHRASES[0][0], k=len(DOCS))}.isdisjoint(
        {PARAPHRASES[0][1]})


@pytest.mark.asyncio
async def test_qdrant_store_async(server: Server, collection_name: str) -> None:
    store = await QdrantVectorStore.afrom_documents(documents(), embeddings(server), url=server.qdrant,
                                                    api_key=server.api_key, collection_name=collection_name)
    hits = await store.asimilarity_search(PARAPHRASES[2][0], k=1)
    assert hits[0].metadata["key"] == PARAPHRASES[2][1]
    # Reopening an existing collection validates its config (get_collection) first.
    again = QdrantVectorStore.from_existing_collection(collection_name=collection_name, embedding=embeddings(server),
                                                       url=server.qdrant, api_key=server.api_key)
    assert (await again.asimilarity_search(PARAPHRASES[3][0], k=1))[0].metadata["key"] == PARAPHRASES[3][1]


def test_chroma_store(server: Server, collection_name: str) -> None:
    client = chromadb.HttpClient(host="127.0.0.1", port=server.chroma_port, headers={"x-chroma-token": server.api_key})
    name = collection_name.replace("_", "-")
    store = Chroma(collection_name=name, embedding_function=embeddings(server), client=client)
    ids = store.add_documents(documents(), ids=[key for key, _, _ in DOCS])
    assert ids == [key for key, _, _ in DOCS]
    for text, want in PARAPHRASES:
        assert store.similarity_search(text, k=1)[0].metadata["key"] == want, text
    kept = store.similarity_search("card", k=10, filter={"topic": "banking"})
    assert sorted(d.metadata["key"] for d in kept) == ["bank1", "bank4"]
    assert [d.metadata["key"] for d in store.get_by_ids(["music1"])] == ["music1"]
    store.delete(["bank1", "bank4"])
    assert client.get_collection(name).count() == len(DOCS) - 2
    assert all(d.metadata["topic"] != "banking" for d in store.similarity_search("card", k=len(DOCS)))
