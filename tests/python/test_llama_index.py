"""LlamaIndex's own stores over moeedb, unmodified:
llama-index-vector-stores-qdrant (moeedb's Qdrant port) and llama-index-vector-stores-chroma (its Chroma port), embedding with
llama-index-embeddings-openai-like pointed at moeedb's /v1."""

from __future__ import annotations

import chromadb
import pytest
from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.vector_stores import ExactMatchFilter, MetadataFilters
from llama_index.embeddings.openai_like import OpenAILikeEmbedding
from llama_index.vector_stores.chroma import ChromaVectorStore
from llama_index.vector_stores.qdrant import QdrantVectorStore
from qdrant_client import AsyncQdrantClient, QdrantClient, models

from conftest import DOCS, PARAPHRASES, Server

pytestmark = pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection")


def embedding(server: Server) -> OpenAILikeEmbedding:
    return OpenAILikeEmbedding(model_name=server.model, api_base=f"{server.base}/v1", api_key=server.api_key)


def documents() -> list[Document]:
    # The key and topic are metadata, not part of the embedded text.
    return [Document(text=text, id_=key, metadata={"key": key, **meta}, excluded_embed_metadata_keys=["key", "topic", "year"])
            for key, text, meta in DOCS]


def check_index(index: VectorStoreIndex) -> None:
    for text, want in PARAPHRASES:
        nodes = index.as_retriever(similarity_top_k=2).retrieve(text)
        assert nodes[0].node.metadata["key"] == want, text
        assert all(-1.0 <= (n.score or 0) <= 1.0 for n in nodes)
    banking = MetadataFilters(filters=[ExactMatchFilter(key="topic", value="banking")])
    kept = index.as_retriever(similarity_top_k=10, filters=banking).retrieve("card")
    assert sorted(n.node.metadata["key"] for n in kept) == ["bank1", "bank4"]


def test_qdrant_vector_store(server: Server, collection_name: str) -> None:
    client = QdrantClient(url=server.qdrant, api_key=server.api_key, timeout=120)
    aclient = AsyncQdrantClient(url=server.qdrant, api_key=server.api_key, timeout=120)
    store = QdrantVectorStore(collection_name=collection_name, client=client, aclient=aclient)
    index = VectorStoreIndex.from_documents(documents(), storage_context=StorageContext.from_defaults(vector_store=store),
                                            embed_model=embedding(server))
    assert client.count(collection_name).count == len(DOCS)  # stored (it stored nothing before)
    # Without hybrid it makes one unnamed Cosine vector (read back to choose its point format).
    assert client.get_collection(collection_name).config.params.vectors.distance.value == "Cosine"
    check_index(index)
    index.delete_ref_doc("bank1", delete_from_docstore=True)
    assert client.count(collection_name).count == len(DOCS) - 1
    assert "bank1" not in {n.node.metadata["key"] for n in index.as_retriever(similarity_top_k=len(DOCS)).retrieve("card")}


@pytest.mark.asyncio
async def test_qdrant_vector_store_async(server: Server, collection_name: str) -> None:
    client = QdrantClient(url=server.qdrant, api_key=server.api_key, timeout=120)
    aclient = AsyncQdrantClient(url=server.qdrant, api_key=server.api_key, timeout=120)
    # A collection made beforehand with LlamaIndex's named dense vector: the store writes and queries by that name.
    size = len(embedding(server).get_text_embedding("size"))
    client.create_collection(collection_name, vectors_config={"text-dense": models.VectorParams(size=size, distance=models.Distance.COSINE)})
    store = QdrantVectorStore(collection_name=collection_name, client=client, aclient=aclient)
    index = VectorStoreIndex.from_documents(documents(), storage_context=StorageContext.from_defaults(vector_store=store),
                                            embed_model=embedding(server), use_async=True)
    [point] = client.scroll(collection_name, limit=1, with_vectors=True)[0]
    assert set(point.vector) == {"text-dense"}
    nodes = await index.as_retriever(similarity_top_k=1).aretrieve(PARAPHRASES[0][0])
    assert nodes[0].node.metadata["key"] == PARAPHRASES[0][1]
    assert (await aclient.count(collection_name)).count == len(DOCS)


def test_chroma_vector_store(server: Server, collection_name: str) -> None:
    client = chromadb.HttpClient(host="127.0.0.1", port=server.chroma_port, headers={"x-chroma-token": server.api_key})
    collection = client.create_collection(collection_name.replace("_", "-"))
    store = ChromaVectorStore(chroma_collection=collection)
    index = VectorStoreIndex.from_documents(documents(), storage_context=StorageContext.from_defaults(vector_store=store),
                                            embed_model=embedding(server))
    assert collection.count() == len(DOCS)
    check_index(index)
    index.delete_ref_doc("bank4")
    assert collection.count() == len(DOCS) - 1
