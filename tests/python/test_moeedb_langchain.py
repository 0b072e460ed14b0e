"""moeedb.langchain against the session's server: LangChain's standard suites
for vector stores and embeddings (sync and async), then what only moeedb has
through the store: server-side embedding, per-query alpha with the score parts,
hybrid search, filters, read-your-writes and client-side MMR."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_tests.integration_tests import EmbeddingsIntegrationTests, VectorStoreIntegrationTests

from conftest import DOCS, PARAPHRASES, Server
from moeedb.langchain import SCORE_PARTS_KEY, MoeedbEmbeddings, MoeedbVectorStore

# The standard suites' async tests carry no asyncio mark of their own (LangChain
# runs them in asyncio "auto" mode); marking the module marks its sync tests too,
# which pytest-asyncio only warns about.
pytestmark = [
    pytest.mark.asyncio,
    pytest.mark.filterwarnings("ignore:.*is marked with '@pytest.mark.asyncio' but it is not an async function"),
]

# The session server, for the embeddings suite's class-level init parameters.
_server: Server | None = None


def _docs() -> list[Document]:
    return [Document(id=key, page_content=text, metadata=meta) for key, text, meta in DOCS]


# -- LangChain's standard suites ------------------------------------------------


class TestMoeedbVectorStoreStandard(VectorStoreIntegrationTests):
    """LangChain's vector store suite: the suite's fake embeddings (6 numbers), so
    the store creates a plain Cosine collection of size 6 and sends vectors."""

    @pytest.fixture()
    def vectorstore(self, server: Server, collection_name: str) -> Iterator[MoeedbVectorStore]:
        store = MoeedbVectorStore(collection_name, self.get_embeddings(), url=server.base, api_key=server.api_key)
        try:
            yield store
        finally:
            store.delete_collection()

    @property
    def has_async(self) -> bool:
        return True


class TestMoeedbEmbeddingsStandard(EmbeddingsIntegrationTests):
    """LangChain's embeddings suite over moeedb's /v1/embeddings."""

    @pytest.fixture(autouse=True)
    def _session_server(self, server: Server) -> None:
        global _server
        _server = server

    @property
    def embeddings_class(self) -> type[MoeedbEmbeddings]:
        return MoeedbEmbeddings

    @property
    def embedding_model_params(self) -> dict[str, Any]:
        assert _server is not None
        return {"url": _server.base, "api_key": _server.api_key}


# -- moeedb through the store -------------------------------------------------


@pytest.fixture()
def store(server: Server, collection_name: str) -> Iterator[MoeedbVectorStore]:
    """A server-embedded store holding DOCS (ids kept)."""
    s = MoeedbVectorStore(collection_name, url=server.base, api_key=server.api_key)
    assert s.add_documents(_docs()) == [key for key, _, _ in DOCS]
    try:
        yield s
    finally:
        s.delete_collection()


class _Wrapped(Embeddings):
    """Embeddings that are not MoeedbEmbeddings (so the store sends vectors) but
    compute moeedb's own: the client-vector path with meaningful vectors."""

    def __init__(self, inner: MoeedbEmbeddings) -> None:
        self.inner = inner
        self.calls = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        self.calls += 1
        return self.inner.embed_query(text)


def test_paraphrase_ranks_first_server_embedded(store: MoeedbVectorStore) -> None:
    assert store.server_embeds and store.embeddings is None
    for query, want in PARAPHRASES:
        docs = store.similarity_search(query, k=3)
        assert docs[0].id == want, query
        key, text, meta = next(d for d in DOCS if d[0] == want)
        assert docs[0] == Document(id=key, page_content=text, metadata=meta)  # as stored: no score keys


async def test_paraphrase_ranks_first_async_from_texts(server: Server, collection_name: str) -> None:
    store = await MoeedbVectorStore.afrom_texts(
        [t for _, t, _ in DOCS], MoeedbEmbeddings(server.base, server.api_key), [m for _, _, m in DOCS],
        ids=[k for k, _, _ in DOCS], collection_name=collection_name, url=server.base, api_key=server.api_key)
    try:
        assert store.server_embeds
        for query, want in PARAPHRASES:
            assert (await store.asimilarity_search(query, k=2))[0].id == want
        hits = await store.asimilarity_search_with_score(PARAPHRASES[0][0], k=1, filter={"topic": "travel"})
        assert [d.id for d, _ in hits] == ["travel1"]
        assert await store.adelete(["travel1", "nope"]) is True
        assert await store.aget_by_ids(["travel1", "bank1"]) == [
            Document(id="bank1", page_content=DOCS[1][1], metadata=DOCS[1][2])]
    finally:
        await store.adelete_collection()


def test_client_vectors_from_other_embeddings(server: Server, collection_name: str) -> None:
    embeddings = _Wrapped(MoeedbEmbeddings(server.base, server.api_key))
    store = MoeedbVectorStore.from_documents(_docs(), embeddings, collection_name=collection_name,
                                             url=server.base, api_key=server.api_key)
    try:
        assert not store.server_embeds
        info = store.client.get_collection(collection_name)
        # A Cosine vector of the served model's fused size is taken as moeedb's fused vector.
        assert info.kind == "fused" and info.documents == len(DOCS)
        for query, want in PARAPHRASES:
            assert store.similarity_search(query, k=2)[0].id == want
        vector = embeddings.embed_query(PARAPHRASES[1][0])
        assert store.similarity_search_by_vector(vector, k=1)[0].id == PARAPHRASES[1][1]
        # Relevance of a cosine: (1 + cos) / 2, the query against its own text is 1.
        (doc, rel), = store.similarity_search_with_relevance_scores(DOCS[2][1], k=1)
        assert doc.id == DOCS[2][0] and rel == pytest.approx(1.0, abs=1e-5)
    finally:
        store.delete_collection()


def test_filters_keep_exactly_the_matching_documents(store: MoeedbVectorStore) -> None:
    def ids(**kwargs: Any) -> set[str]:
        return {d.id for d in store.similarity_search("anything at all", k=20, **kwargs) if d.id}

    assert ids() == {k for k, _, _ in DOCS}
    assert ids(filter={"topic": "banking"}) == {"bank1", "bank4"}
    assert ids(filter={"year": {"$gte": 2023}}) == {"travel1", "tech7", "bank4"}
    assert ids(filter={"$or": [{"topic": "music"}, {"year": 2024}]}) == {"music1", "tech7"}
    assert ids(filter={"topic": {"$nin": ["banking", "animals"]}, "year": {"$lt": 2024}}) == {"travel1", "music1"}
    assert ids(filter={"topic": "nothing"}) == set()


def test_delete_and_get_by_ids(store: MoeedbVectorStore) -> None:
    assert store.delete(["bank1", "music1", "missing"]) is True
    assert store.last_seq is not None
    assert {d.id for d in store.get_by_ids(["bank1", "bank4", "music1", "missing"])} == {"bank4"}
    hits = store.similarity_search(PARAPHRASES[0][0], k=10, min_seq=store.last_seq)
    assert {d.id for d in hits} == {k for k, _, _ in DOCS} - {"bank1", "music1"}


def test_alpha_per_query_scores_and_parts(store: MoeedbVectorStore) -> None:
    query, want = PARAPHRASES[2]
    by_alpha = {}
    for alpha in (0.0, 0.15, 1.0, 3.0):
        results = store.similarity_search_with_score(query, k=len(DOCS), alpha=alpha)
        assert len(results) == len(DOCS)
        for doc, score in results:
            parts = doc.metadata[SCORE_PARTS_KEY]
            assert score == pytest.approx(parts["score_hs"] + alpha * parts["score_rw"], abs=1e-5)
            assert parts["parts"]["hs"] == pytest.approx(parts["score_hs"], abs=1e-6)
            assert parts["parts"]["rw"] == pytest.approx(alpha * parts["score_rw"], abs=1e-5)
            assert score == pytest.approx(sum(parts["parts"].values()), abs=1e-5)
            user = {k: v for k, v in doc.metadata.items() if k != SCORE_PARTS_KEY}
            assert user == next(m for k, _, m in DOCS if k == doc.id)  # user metadata untouched
        by_alpha[alpha] = {d.id: s for d, s in results}
    assert by_alpha[0.0] != by_alpha[3.0]
    # Same per-signal scores, other weights: score(3) - score(0) == 3 * score_rw.
    assert set(by_alpha[0.0]) == set(by_alpha[3.0])
    # Relevance lies in [0, 1] for every mode.
    for kwargs in ({}, {"alpha": 2.0}, {"mode": "hs"}, {"mode": "lexical"}, {"mode": "hybrid", "beta": 2.0}):
        rel = store.similarity_search_with_relevance_scores(query, k=len(DOCS), **kwargs)
        assert rel and all(0.0 <= r <= 1.0 for _, r in rel), kwargs
    assert store.similarity_search_with_relevance_scores(query, k=1)[0][0].id == want


def test_user_metadata_key_is_not_clobbered(server: Server, collection_name: str) -> None:
    store = MoeedbVectorStore(collection_name, url=server.base, api_key=server.api_key)
    try:
        store.add_texts(["a red bicycle"], [{SCORE_PARTS_KEY: "mine"}], ids=["x"])
        (doc, _), = store.similarity_search_with_score("bicycle", k=1)
        assert doc.metadata == {SCORE_PARTS_KEY: "mine"}
    finally:
        store.delete_collection()


async def test_hybrid_with_beta_parts_sum_to_score(store: MoeedbVectorStore) -> None:
    query = "card charged twice"
    for beta in (0.5, 16.0):
        results = await store.asimilarity_search_with_score(query, k=4, mode="hybrid", beta=beta)
        assert results[0][0].id == "bank1"
        for doc, score in results:
            parts = doc.metadata[SCORE_PARTS_KEY]["parts"]
            assert score == pytest.approx(parts["hs"] + parts["rw"] + parts["lex"], abs=1e-6)
        top = results[0][0].metadata[SCORE_PARTS_KEY]["parts"]
        # rrf: each part is weight / (60 + rank); bank1 is first lexically.
        assert top["lex"] == pytest.approx(beta / 61.0, rel=1e-4)
    lexical = await store.asimilarity_search_with_score(query, k=4, mode="lexical")
    assert lexical[0][0].id == "bank1" and all(d.metadata[SCORE_PARTS_KEY]["score_lex"] > 0 for d, _ in lexical)


def test_max_marginal_relevance_skips_duplicates(store: MoeedbVectorStore) -> None:
    store.add_texts([DOCS[1][1]], [{"topic": "banking", "copy": True}], ids=["bank1-copy"])
    query = PARAPHRASES[0][0]
    plain = store.similarity_search(query, k=2)
    assert {d.id for d in plain} == {"bank1", "bank1-copy"}
    picked = store.max_marginal_relevance_search(query, k=2, fetch_k=7, lambda_mult=0.5)
    assert len(picked) == 2 and picked[0].id in {"bank1", "bank1-copy"}
    assert picked[1].id not in {"bank1", "bank1-copy"}
    only_relevance = store.max_marginal_relevance_search(query, k=2, fetch_k=7, lambda_mult=1.0)
    assert {d.id for d in only_relevance} == {"bank1", "bank1-copy"}


async def test_mmr_async_with_client_vectors(server: Server, collection_name: str) -> None:
    embeddings = _Wrapped(MoeedbEmbeddings(server.base, server.api_key))
    store = MoeedbVectorStore(collection_name, embeddings, url=server.base, api_key=server.api_key)
    try:
        await store.aadd_documents(_docs() + [Document(id="dup", page_content=DOCS[3][1], metadata={})])
        query = PARAPHRASES[2][0]
        picked = await store.amax_marginal_relevance_search(query, k=2, fetch_k=7, lambda_mult=0.5)
        assert picked[0].id in {"tech7", "dup"} and picked[1].id not in {"tech7", "dup"}
        by_vector = await store.amax_marginal_relevance_search_by_vector(
            await embeddings.aembed_query(query), k=2, fetch_k=7, lambda_mult=0.5)
        assert [d.id for d in by_vector] == [d.id for d in picked]
    finally:
        await store.adelete_collection()


def test_read_your_writes_with_min_seq(server: Server, collection_name: str) -> None:
    store = MoeedbVectorStore(collection_name, url=server.base, api_key=server.api_key, wait=False)
    try:
        store.add_documents(_docs())
        seq = store.last_seq
        assert seq is not None and seq > 0
        assert store.similarity_search(PARAPHRASES[3][0], k=1, min_seq=seq)[0].id == PARAPHRASES[3][1]
    finally:
        store.delete_collection()


def test_unknown_search_argument_is_an_error(store: MoeedbVectorStore) -> None:
    with pytest.raises(TypeError, match="fliter"):
        store.similarity_search("x", k=1, fliter={"topic": "banking"})
