"""qdrant-client (sync and async) against moeedb's Qdrant port, unmodified,
as LangChain's, LlamaIndex's and Haystack's Qdrant stores drive it: each of
the issue's six items (collection config, the "" vector, hex UUIDs, payload
routes, any vector names, Cosine semantics) and the basics (the paraphrase
ranks first, filters keep exactly what they should, counts, deletes)."""

from __future__ import annotations

import uuid

import httpx
import pytest
from qdrant_client import AsyncQdrantClient, QdrantClient, models
from qdrant_client.http.exceptions import UnexpectedResponse

from conftest import DOCS, PARAPHRASES, Server
from e2e_util import api, embed, norm

pytestmark = pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection")


def client(server: Server) -> QdrantClient:
    return QdrantClient(url=server.qdrant, api_key=server.api_key, timeout=120)


def fill(server: Server, q: QdrantClient, name: str, vector_name: str = "") -> dict[str, str]:
    """The DOCS as points of a fused-size Cosine collection under `vector_name`,
    with LangChain's ids (uuid4().hex); their id -> DOCS id."""
    vectors = embed(server, [text for _, text, _ in DOCS])
    q.create_collection(name, vectors_config={vector_name: models.VectorParams(size=len(vectors[0]),
                                                                               distance=models.Distance.COSINE)})
    ids = {uuid.uuid4().hex: key for key, _, _ in DOCS}
    q.upsert(name, points=[models.PointStruct(id=pid, vector={vector_name: v},
                                              payload={"page_content": text, "metadata": meta})
                           for pid, v, (_, text, meta) in zip(ids, vectors, DOCS)], wait=True)
    return ids


def test_info_names_the_server_as_qdrant_and_the_pinned_api_version(server: Server) -> None:
    # qdrant-client's congruence suite compares the title with its local
    # mode's; the client checks the version for compatibility.
    info = client(server).info()
    assert info.title == QdrantClient(":memory:").info().title == "qdrant - vector search engine"
    assert info.version == "1.18.0"


def test_conditional_upserts_write_only_what_their_condition_lets_through(server: Server, collection_name: str) -> None:
    q = client(server)
    ids = fill(server, q, collection_name)
    before = q.count(collection_name).count
    pid = next(iter(ids))
    point = q.retrieve(collection_name, [pid], with_vectors=True)[0]
    changed = models.PointStruct(id=pid, vector=point.vector, payload={"page_content": "changed"})
    # update_filter: a stored point is replaced only when the filter keeps its stored version.
    only_if = models.Filter(must=[models.FieldCondition(key="metadata.nope", match=models.MatchValue(value=1))])
    q.upsert(collection_name, points=[changed], update_filter=only_if, wait=True)
    assert q.retrieve(collection_name, [pid])[0].payload["page_content"] != "changed"
    # insert_only leaves stored points alone and adds new ones; update_only the reverse.
    new_point = models.PointStruct(id=uuid.uuid4().hex, vector=point.vector, payload={"page_content": "new"})
    q.upsert(collection_name, points=[changed, new_point], update_mode=models.UpdateMode.INSERT_ONLY, wait=True)
    assert q.count(collection_name).count == before + 1
    assert q.retrieve(collection_name, [pid])[0].payload["page_content"] != "changed"
    other = models.PointStruct(id=uuid.uuid4().hex, vector=point.vector, payload={"page_content": "never"})
    q.upsert(collection_name, points=[changed, other], update_mode=models.UpdateMode.UPDATE_ONLY, wait=True)
    assert q.count(collection_name).count == before + 1
    assert q.retrieve(collection_name, [pid])[0].payload["page_content"] == "changed"
    # A bad mode or filter: 400, nothing written.
    for body in ({"points": [{"id": 1, "vector": point.vector}], "update_mode": "sometimes"},
                 {"points": [{"id": 1, "vector": point.vector}], "update_filter": {"must": [{"key": "a[x]", "match": {"value": 1}}]}}):
        r = httpx.put(f"{server.qdrant}/collections/{collection_name}/points?wait=true", json=body,
                      headers={"api-key": server.api_key}, timeout=60)
        assert r.status_code == 400 and "error" in r.json()["status"], r.text
    assert q.count(collection_name).count == before + 1


def test_get_collection_parses_and_reports_real_counts(server: Server, collection_name: str) -> None:
    q = client(server)
    fill(server, q, collection_name)
    info = q.get_collection(collection_name)  # raised before: config lacked hnsw_config, optimizer_config
    assert info.points_count == len(DOCS)
    assert info.status == models.CollectionStatus.GREEN
    assert info.config.hnsw_config.full_scan_threshold > 0
    assert info.config.optimizer_config.flush_interval_sec > 0
    params = info.config.params.vectors
    assert isinstance(params, dict) and set(params) == {""}  # created as {"": {...}}: answered the same way
    assert params[""].distance == models.Distance.COSINE
    assert q.collection_exists(collection_name)
    assert collection_name in {c.name for c in q.get_collections().collections}


def test_unnamed_vector_by_name_hex_uuids_and_cosine_scores(server: Server, collection_name: str) -> None:
    q = client(server)
    ids = fill(server, q, collection_name)
    # Hex ids are stored as Qdrant stores them: hyphenated.
    got = q.retrieve(collection_name, ids=list(ids)[:2], with_vectors=True)
    assert {p.id for p in got} == {str(uuid.UUID(h)) for h in list(ids)[:2]}
    for p in got:
        assert abs(norm(p.vector) - 1.0) < 1e-5  # Cosine vectors come back at unit length
    for text, want in PARAPHRASES:
        [vector] = embed(server, [text])
        hits = q.query_points(collection_name, query=vector, using="", limit=3, with_payload=True).points
        assert ids[hits[0].id.replace("-", "")] == want, text
        assert all(-1.0 <= h.score <= 1.0 for h in hits), [h.score for h in hits]
        assert hits[0].score >= hits[1].score >= hits[2].score
    # A batch of queries, the unnamed vector by name, answered in order.
    vectors = embed(server, [text for text, _ in PARAPHRASES])
    batch = q.query_batch_points(collection_name, requests=[models.QueryRequest(query=v, using="", limit=1) for v in vectors])
    assert [ids[r.points[0].id.replace("-", "")] for r in batch] == [want for _, want in PARAPHRASES]


def test_filters_counts_scroll_and_deletes(server: Server, collection_name: str) -> None:
    q = client(server)
    ids = fill(server, q, collection_name)
    banking = models.Filter(must=[models.FieldCondition(key="metadata.topic", match=models.MatchValue(value="banking"))])
    assert q.count(collection_name, count_filter=banking).count == 2
    assert q.count(collection_name).count == len(DOCS)
    [vector] = embed(server, ["My card has not come yet."])
    hits = q.query_points(collection_name, query=vector, query_filter=banking, limit=10, with_payload=True).points
    assert {ids[h.id.replace("-", "")] for h in hits} == {"bank1", "bank4"}
    recent = models.Filter(must=[models.FieldCondition(key="metadata.year", range=models.Range(gte=2023))])
    assert q.count(collection_name, count_filter=recent).count == 3
    # Scroll pages through every point once.
    seen, offset = [], None
    while True:
        page, offset = q.scroll(collection_name, limit=4, offset=offset)
        seen += [p.id for p in page]
        if offset is None:
            break
    assert len(seen) == len(set(seen)) == len(DOCS)
    q.delete(collection_name, points_selector=models.FilterSelector(filter=banking), wait=True)
    assert q.count(collection_name).count == len(DOCS) - 2
    # A point the filter kept (ids are random, so scroll order puts any DOCS entry first).
    survivor = next(pid for pid in seen if not ids[pid.replace("-", "")].startswith("bank"))
    q.delete(collection_name, points_selector=models.PointIdsList(points=[survivor]), wait=True)
    assert q.count(collection_name).count == len(DOCS) - 3
    assert q.retrieve(collection_name, ids=[survivor]) == []


def test_payload_indexes_are_listed_and_leave_answers_unchanged(server: Server, collection_name: str) -> None:
    q = client(server)
    ids = fill(server, q, collection_name)
    [vector] = embed(server, ["My card has not come yet."])
    banking = models.Filter(must=[models.FieldCondition(key="metadata.topic", match=models.MatchValue(value="banking"))])
    recent = models.Filter(must=[models.FieldCondition(key="metadata.year", range=models.Range(gte=2023))])

    def answers() -> list[list[tuple[str, float]]]:
        return [[(ids[h.id.replace("-", "")], round(h.score, 5))
                 for h in q.query_points(collection_name, query=vector, query_filter=f, limit=10).points]
                for f in (banking, recent)]

    before = answers()
    q.create_payload_index(collection_name, "metadata.topic", models.PayloadSchemaType.KEYWORD, wait=True)
    q.create_payload_index(collection_name, "metadata.year",
                           models.IntegerIndexParams(type=models.IntegerIndexType.INTEGER), wait=True)
    schema = q.get_collection(collection_name).payload_schema
    assert schema["metadata.topic"].data_type == models.PayloadSchemaType.KEYWORD
    assert schema["metadata.topic"].points == len(DOCS)
    assert schema["metadata.year"].data_type == models.PayloadSchemaType.INTEGER
    assert answers() == before
    assert {k for k, _ in before[0]} == {"bank1", "bank4"}
    # Writes after the index keep it current: a third banking point is found through it.
    point = q.retrieve(collection_name, [next(pid for pid, key in ids.items() if key == "music1")], with_vectors=True)[0]
    q.set_payload(collection_name, {"metadata": {"topic": "banking", "year": 2020}}, points=[point.id], wait=True)
    assert {k for k, _ in answers()[0]} == {"bank1", "bank4", "music1"}
    q.delete_payload_index(collection_name, "metadata.year", wait=True)
    assert set(q.get_collection(collection_name).payload_schema) == {"metadata.topic"}
    # An unknown kind is a 400 that names it.
    bad = httpx.put(f"{server.qdrant}/collections/{collection_name}/index", headers={"api-key": server.api_key},
                    json={"field_name": "x", "field_schema": "keywords"}, timeout=60)
    assert bad.status_code == 400
    assert "keywords" in bad.json()["status"]["error"]


def test_payload_set_overwrite_delete_clear(server: Server, collection_name: str) -> None:
    q = client(server)
    ids = fill(server, q, collection_name)
    first, second = list(ids)[:2]
    q.set_payload(collection_name, payload={"reviewed": True}, points=[first], wait=True)
    [p] = q.retrieve(collection_name, ids=[first])
    assert p.payload["reviewed"] is True and p.payload["metadata"] == DOCS[0][2]
    q.set_payload(collection_name, payload={"inner": 1}, points=[first], key="metadata", wait=True)
    assert q.retrieve(collection_name, ids=[first])[0].payload["metadata"]["inner"] == 1
    reviewed = models.Filter(must=[models.FieldCondition(key="reviewed", match=models.MatchValue(value=True))])
    assert q.count(collection_name, count_filter=reviewed).count == 1
    # By filter: every banking point.
    banking = models.Filter(must=[models.FieldCondition(key="metadata.topic", match=models.MatchValue(value="banking"))])
    q.set_payload(collection_name, payload={"reviewed": True}, points=banking, wait=True)
    assert q.count(collection_name, count_filter=reviewed).count == 3
    q.delete_payload(collection_name, keys=["reviewed"], points=[first], wait=True)
    assert "reviewed" not in q.retrieve(collection_name, ids=[first])[0].payload
    q.overwrite_payload(collection_name, payload={"page_content": "replaced text"}, points=[second], wait=True)
    assert q.retrieve(collection_name, ids=[second])[0].payload == {"page_content": "replaced text"}
    q.clear_payload(collection_name, points_selector=[second], wait=True)
    assert q.retrieve(collection_name, ids=[second])[0].payload == {}
    # A missing point: 404, and nothing else changed.
    with pytest.raises(UnexpectedResponse) as e:
        q.set_payload(collection_name, payload={"x": 1}, points=[first, uuid.uuid4().hex], wait=True)
    assert e.value.status_code == 404
    assert "x" not in q.retrieve(collection_name, ids=[first])[0].payload
    assert q.count(collection_name).count == len(DOCS)


def test_named_vectors_of_any_names_sizes_and_distances(server: Server, collection_name: str) -> None:
    q = client(server)
    q.create_collection(collection_name, vectors_config={
        "text": models.VectorParams(size=4, distance=models.Distance.COSINE),
        "image": models.VectorParams(size=3, distance=models.Distance.EUCLID)})
    info = q.get_collection(collection_name)
    assert info.config.params.vectors["image"].size == 3
    assert info.config.params.vectors["image"].distance == models.Distance.EUCLID
    points = [models.PointStruct(id=i, vector={"text": [1.0, i, 0.0, 0.5], "image": [float(i), 0.0, 1.0]},
                                 payload={"i": i}) for i in range(10)]
    q.upsert(collection_name, points=points, wait=True)
    by_image = q.query_points(collection_name, query=[3.2, 0.0, 1.0], using="image", limit=3).points
    assert [p.id for p in by_image] == [3, 4, 2]
    assert abs(by_image[0].score - 0.2) < 1e-5  # Euclid: the distance
    by_text = q.query_points(collection_name, query=[1.0, 9.0, 0.0, 0.5], using="text", limit=1).points
    assert by_text[0].id == 9
    back = q.retrieve(collection_name, ids=[2], with_vectors=True)[0].vector
    assert back["image"] == [2.0, 0.0, 1.0] and abs(norm(back["text"]) - 1) < 1e-6
    # Unknown names and too many vectors: a 400 that names them, nothing created or stored.
    with pytest.raises(UnexpectedResponse) as e:
        q.query_points(collection_name, query=[1.0, 0.0, 0.0], using="audio", limit=1)
    assert e.value.status_code == 400 and "audio" in str(e.value.content)
    with pytest.raises(UnexpectedResponse) as e:
        q.upsert(collection_name, points=[models.PointStruct(id=99, vector={"audio": [1.0, 0, 0, 0]})], wait=True)
    assert e.value.status_code == 400 and "audio" in str(e.value.content)
    assert q.count(collection_name).count == 10
    # A point may lack a named vector (Qdrant's optional vectors): it reads
    # back without it and a search of that vector leaves it out.
    q.upsert(collection_name, points=[models.PointStruct(id=99, vector={"text": [1.0, 9.0, 0.0, 0.5]})], wait=True)
    assert set(q.retrieve(collection_name, ids=[99], with_vectors=True)[0].vector) == {"text"}
    assert 99 not in [p.id for p in q.query_points(collection_name, query=[3.2, 0.0, 1.0], using="image", limit=20).points]
    assert 99 in [p.id for p in q.query_points(collection_name, query=[1.0, 9.0, 0.0, 0.5], using="text", limit=2).points]
    assert q.count(collection_name).count == 11
    other = collection_name + "_3"
    q.create_collection(other, vectors_config={n: models.VectorParams(size=2, distance=models.Distance.DOT)
                                               for n in ("a", "b", "c")})
    assert set(q.get_collection(other).config.params.vectors) == {"a", "b", "c"}
    q.delete_collection(other)
    with pytest.raises(UnexpectedResponse) as e:
        q.create_collection(other, vectors_config={f"v{i}": models.VectorParams(size=2, distance=models.Distance.DOT)
                                                   for i in range(65)})
    assert e.value.status_code == 400 and "at most 64" in str(e.value.content)
    assert not q.collection_exists(other)


def test_text_under_page_content_feeds_bm25(server: Server, collection_name: str) -> None:
    q = client(server)
    ids = fill(server, q, collection_name)
    r = api(server, "POST", f"/collections/{collection_name}/search", {"query": "guitar street", "mode": "lexical", "k": 2})
    assert r.status_code == 200, r.text
    assert r.json()["hits"][0]["text"] == DOCS[4][1]
    assert ids  # the points were LangChain-shaped: text under page_content


@pytest.mark.asyncio
async def test_async_client_does_the_same(server: Server, collection_name: str) -> None:
    q = AsyncQdrantClient(url=server.qdrant, api_key=server.api_key, timeout=120)
    vectors = embed(server, [text for _, text, _ in DOCS])
    await q.create_collection(collection_name, vectors_config=models.VectorParams(size=len(vectors[0]),
                                                                                  distance=models.Distance.COSINE))
    info = await q.get_collection(collection_name)
    assert info.config.params.vectors.size == len(vectors[0])  # created unnamed: answered unnamed
    await q.upsert(collection_name, points=[models.PointStruct(id=uuid.uuid4().hex, vector=v, payload={"key": key, **meta})
                                            for v, (key, _, meta) in zip(vectors, DOCS)], wait=True)
    assert (await q.count(collection_name)).count == len(DOCS)
    for text, want in PARAPHRASES:
        [vector] = embed(server, [text])
        hits = (await q.query_points(collection_name, query=vector, limit=1, with_payload=True)).points
        assert hits[0].payload["key"] == want
    await q.set_payload(collection_name, payload={"seen": 1}, points=models.Filter(
        must=[models.FieldCondition(key="year", match=models.MatchValue(value=2021))]), wait=True)
    seen = models.Filter(must=[models.FieldCondition(key="seen", match=models.MatchValue(value=1))])
    assert (await q.count(collection_name, count_filter=seen)).count == 2
    await q.delete(collection_name, points_selector=models.FilterSelector(filter=seen), wait=True)
    assert (await q.count(collection_name)).count == len(DOCS) - 2
    assert await q.delete_collection(collection_name)
    assert not await q.collection_exists(collection_name)
    await q.close()
