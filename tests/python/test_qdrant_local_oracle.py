"""moeedb's Qdrant port against qdrant-client's own in-process local mode
(`QdrantClient(":memory:")`, Qdrant's semantics in Python) as the oracle:
the same points go to both, and every answer below must agree. Points carry
three named vectors of their own sizes and distances, each missing from
some points, integer and UUID ids, and payloads with nested objects, lists
of objects, nulls, empty lists, geo points and datetimes, so that the
filters exercise what Qdrant's filter language means: paths into lists
(`a[].b`, `a[0]`), `nested`, `is_empty`/`is_null`, `values_count`, geo
radius/box/polygon, datetime ranges, `match` any/except/text/text_any,
`min_should`, `has_id`, `has_vector`. Each answer is compared whole: counts,
the scroll's order (integers by number, then UUIDs), and each vector's
ranked hits with their scores."""

from __future__ import annotations

import math
import random
import uuid

import httpx
import pytest
from qdrant_client import QdrantClient, models

from conftest import Server

pytestmark = pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection")

VECTORS = {
    "text": models.VectorParams(size=4, distance=models.Distance.COSINE),
    "image": models.VectorParams(size=3, distance=models.Distance.EUCLID),
    "code": models.VectorParams(size=2, distance=models.Distance.DOT),
}
WORDS = ["cat", "dog", "fox", "owl", "bee", "elk"]
CITIES = [("Berlin", 52.52, 13.405), ("Paris", 48.8566, 2.3522), ("Rome", 41.9028, 12.4964), ("Oslo", 59.9139, 10.7522)]


def points(seed: int = 7, n: int = 90) -> list[models.PointStruct]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        pid: int | str = i * 3 + 1 if i % 3 else str(uuid.UUID(int=rng.getrandbits(128), version=4))
        vector = {name: [round(rng.uniform(-1, 1), 3) for _ in range(p.size)] for name, p in VECTORS.items()}
        for name in VECTORS:  # some points lack a vector
            if rng.random() < 0.2:
                del vector[name]
        city, lat, lon = rng.choice(CITIES)
        payload = {
            "n": i,
            "word": rng.choice(WORDS),
            "words": " ".join(rng.sample(WORDS, 2)),
            "tags": rng.sample(WORDS, rng.randint(0, 3)),
            "maybe": rng.choice([None, "x", [], [None], ["x", None]]),
            "city": {"name": city, "geo": {"lat": lat + rng.uniform(-0.05, 0.05), "lon": lon + rng.uniform(-0.05, 0.05)}},
            "visits": [{"year": rng.randint(2000, 2024), "rating": rng.randint(1, 5)} for _ in range(rng.randint(0, 3))],
            "at": f"2024-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}T{rng.randint(10, 23)}:00:00Z",
        }
        if rng.random() < 0.2:
            del payload["word"]
        out.append(models.PointStruct(id=pid, vector=vector, payload=payload))
    return out


def field(key: str, **condition: object) -> models.FieldCondition:
    return models.FieldCondition(key=key, **condition)


def filters(ids: list[int | str]) -> list[models.Filter]:
    berlin = models.GeoPoint(lat=52.52, lon=13.405)
    return [
        models.Filter(must=[field("word", match=models.MatchValue(value="cat"))]),
        models.Filter(must_not=[field("word", match=models.MatchValue(value="cat"))]),
        models.Filter(must=[field("word", match=models.MatchExcept(**{"except": ["cat", "dog"]}))]),
        models.Filter(must=[field("tags", match=models.MatchAny(any=["owl", "bee"]))]),
        models.Filter(must=[field("tags[0]", match=models.MatchValue(value="fox"))]),
        models.Filter(must=[field("words", match=models.MatchText(text="cat"))]),
        models.Filter(must=[field("words", match=models.MatchTextAny(text_any="owl elk"))]),
        models.Filter(must=[field("n", range=models.Range(gte=20, lt=50))]),
        models.Filter(should=[field("n", range=models.Range(lt=5)), field("n", range=models.Range(gt=80))]),
        models.Filter(must=[field("visits[].year", range=models.Range(gte=2020))]),
        models.Filter(must=[field("visits[].rating", match=models.MatchValue(value=5)),
                            field("visits[].year", range=models.Range(lt=2005))]),
        models.Filter(must=[models.NestedCondition(nested=models.Nested(key="visits", filter=models.Filter(
            must=[field("rating", match=models.MatchValue(value=5)), field("year", range=models.Range(lt=2005))])))]),
        models.Filter(must=[models.IsEmptyCondition(is_empty=models.PayloadField(key="maybe"))]),
        models.Filter(must=[models.IsNullCondition(is_null=models.PayloadField(key="maybe"))]),
        models.Filter(must=[models.IsEmptyCondition(is_empty=models.PayloadField(key="visits"))]),
        models.Filter(must=[models.IsEmptyCondition(is_empty=models.PayloadField(key="word"))]),
        models.Filter(must=[field("tags", values_count=models.ValuesCount(gte=2))]),
        models.Filter(must=[field("visits", values_count=models.ValuesCount(lt=2))]),
        models.Filter(must=[field("city.geo", geo_radius=models.GeoRadius(center=berlin, radius=4000.0))]),
        models.Filter(must=[field("city.geo", geo_bounding_box=models.GeoBoundingBox(
            top_left=models.GeoPoint(lat=60.5, lon=2.0), bottom_right=models.GeoPoint(lat=48.0, lon=11.0)))]),
        models.Filter(must=[field("city.geo", geo_polygon=models.GeoPolygon(exterior=models.GeoLineString(points=[
            models.GeoPoint(lat=40, lon=0), models.GeoPoint(lat=55, lon=0), models.GeoPoint(lat=55, lon=15),
            models.GeoPoint(lat=40, lon=15), models.GeoPoint(lat=40, lon=0)])))]),
        models.Filter(must=[field("at", range=models.DatetimeRange(gte="2024-03-01T00:00:00Z", lt="2024-06-15T12:00:00+02:00"))]),
        models.Filter(min_should=models.MinShould(min_count=2, conditions=[
            field("word", match=models.MatchValue(value="dog")), field("tags", match=models.MatchAny(any=["dog"])),
            field("words", match=models.MatchText(text="dog"))])),
        models.Filter(must=[models.HasIdCondition(has_id=ids[::4])]),
        models.Filter(must=[models.HasVectorCondition(has_vector="image")]),
        models.Filter(must_not=[models.HasVectorCondition(has_vector="code")]),
        models.Filter(must=[field("city.name", match=models.MatchValue(value="Rome"))],
                      must_not=[models.HasVectorCondition(has_vector="text")]),
    ]


@pytest.fixture
def both(server: Server, collection_name: str) -> tuple[QdrantClient, QdrantClient, list[models.PointStruct]]:
    remote = QdrantClient(url=server.qdrant, api_key=server.api_key, timeout=120)
    local = QdrantClient(":memory:")
    pts = points()
    for c in (local, remote):
        c.create_collection(collection_name, vectors_config=VECTORS)
        c.upsert(collection_name, points=pts, wait=True)
    return local, remote, pts


def scroll_all(c: QdrantClient, name: str, flt: models.Filter | None = None) -> list[int | str]:
    seen, offset = [], None
    while True:
        page, offset = c.scroll(name, scroll_filter=flt, limit=7, offset=offset)
        seen += [p.id for p in page]
        if offset is None:
            return seen


def test_filters_counts_and_scroll_order_agree_with_local_mode(both, collection_name: str) -> None:
    local, remote, pts = both
    assert scroll_all(remote, collection_name) == scroll_all(local, collection_name)  # integers by number, then UUIDs
    for i, flt in enumerate(filters([p.id for p in pts])):
        want = scroll_all(local, collection_name, flt)
        assert 0 < len(want) < len(pts), f"filter {i} keeps {len(want)} of {len(pts)}: it tests nothing"
        assert scroll_all(remote, collection_name, flt) == want, f"filter {i}: {flt}"
        assert remote.count(collection_name, count_filter=flt).count == len(want), f"filter {i}"


def test_each_named_vector_ranks_as_local_mode_leaving_out_points_without_it(both, collection_name: str) -> None:
    local, remote, pts = both
    rng = random.Random(3)
    flts = [None] + filters([p.id for p in pts])[::5]
    for name, params in VECTORS.items():
        have = sum(1 for p in pts if name in p.vector)
        for flt in flts:
            q = [rng.uniform(-1, 1) for _ in range(params.size)]
            want = local.query_points(collection_name, query=q, using=name, query_filter=flt, limit=len(pts)).points
            got = remote.query_points(collection_name, query=q, using=name, query_filter=flt, limit=len(pts)).points
            assert len(want) <= have
            assert [p.id for p in got] == [p.id for p in want], (name, flt)
            for g, w in zip(got, want):
                assert math.isclose(g.score, w.score, rel_tol=1e-4, abs_tol=1e-5), (name, g.id, g.score, w.score)


def test_points_read_back_with_the_vectors_they_have(both, collection_name: str) -> None:
    local, remote, pts = both
    ids = [p.id for p in pts][:30]
    want = {p.id: p.vector for p in local.retrieve(collection_name, ids=ids, with_vectors=True)}
    got = {p.id: p.vector for p in remote.retrieve(collection_name, ids=ids, with_vectors=True)}
    assert set(got) == set(want)
    for pid, vectors in want.items():
        assert set(got[pid]) == set(vectors), pid
        for name, v in vectors.items():
            assert all(math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-6) for a, b in zip(got[pid][name], v)), (pid, name)


def test_bad_filters_answer_qdrants_error_naming_the_field(both, collection_name: str, server: Server) -> None:
    # Sent as raw JSON: the client's own models would refuse them before sending.
    for condition, named in [
        ({"key": "at", "range": {"gte": "not a time"}}, "at"),
        ({"key": "tags[x]", "match": {"value": "cat"}}, "tags[x]"),
        ({"key": "city.geo", "geo_polygon": {"exterior": {"points": [{"lat": 1, "lon": 1}]}}}, "city.geo"),
        ({"key": "n", "values_count": {"most": 1}}, "n"),
        ({"key": "n", "match": {"regex": "x"}}, "n"),
        ({"nested": {"key": "visits"}}, "nested"),
        ({"key": "word"}, "word"),
    ]:
        r = httpx.post(f"{server.qdrant}/collections/{collection_name}/points/count", json={"filter": {"must": [condition]}},
                       headers={"api-key": server.api_key}, timeout=60)
        assert r.status_code == 400, (condition, r.text)
        error = r.json()["status"]["error"]
        assert named in error, (condition, error)
    assert both[1].count(collection_name).count == len(both[2])


def test_vector_updates_deletes_and_batches_leave_what_local_mode_leaves(both, collection_name: str) -> None:
    local, remote, pts = both
    ids = [p.id for p in pts]
    for c in (local, remote):
        c.update_vectors(collection_name, points=[
            models.PointVectors(id=ids[0], vector={"image": [0.5, 0.5, 0.5]}),
            models.PointVectors(id=ids[1], vector={"code": [1.0, -1.0], "text": [0.0, 0.0, 1.0, 0.0]})], wait=True)
        c.delete_vectors(collection_name, vectors=["text"], points=ids[2:6], wait=True)
        c.delete_vectors(collection_name, vectors=["code", "image"],
                         points=models.FilterSelector(filter=models.Filter(must=[field("word", match=models.MatchValue(value="owl"))])),
                         wait=True)
        c.batch_update_points(collection_name, update_operations=[
            models.UpsertOperation(upsert=models.PointsList(points=[
                models.PointStruct(id=10_000, vector={"code": [2.0, 2.0]}, payload={"n": -1})])),
            models.SetPayloadOperation(set_payload=models.SetPayload(payload={"flag": True}, points=ids[6:9])),
            models.DeletePayloadOperation(delete_payload=models.DeletePayload(keys=["tags"], points=ids[9:12])),
            models.DeleteOperation(delete=models.PointIdsList(points=ids[12:14])),
            models.UpdateVectorsOperation(update_vectors=models.UpdateVectors(points=[
                models.PointVectors(id=ids[14], vector={"text": [1.0, 1.0, 1.0, 1.0]})])),
            models.DeleteVectorsOperation(delete_vectors=models.DeleteVectors(points=ids[15:17], vector=["image"])),
        ], wait=True)

    def everything(c: QdrantClient) -> list[tuple]:
        out, offset = [], None
        while True:
            page, offset = c.scroll(collection_name, limit=50, offset=offset, with_vectors=True)
            for p in page:
                vectors = {k: [round(x, 4) for x in v] for k, v in sorted(p.vector.items())}
                out.append((p.id, p.payload, vectors))
            if offset is None:
                return out

    got, want = everything(remote), everything(local)
    assert [g[0] for g in got] == [w[0] for w in want]
    for g, w in zip(got, want):
        assert g == w, g[0]
    # A name the collection does not declare, or a missing point: 4xx, nothing changed.
    from qdrant_client.http.exceptions import UnexpectedResponse

    with pytest.raises(UnexpectedResponse) as e:
        remote.delete_vectors(collection_name, vectors=["audio"], points=ids[:1], wait=True)
    assert e.value.status_code == 400 and "audio" in str(e.value.content)
    with pytest.raises(UnexpectedResponse) as e:
        remote.update_vectors(collection_name, points=[models.PointVectors(id=123456789, vector={"code": [1.0, 1.0]})], wait=True)
    assert e.value.status_code == 404
    assert everything(remote) == got


def test_recommend_discover_and_context_score_as_local_mode(both, collection_name: str, server: Server) -> None:
    local, remote, pts = both
    rng = random.Random(5)
    other = collection_name + "_lookup"
    lookup_points = [models.PointStruct(id=i, vector={"v": [rng.uniform(-1, 1) for _ in range(4)]}) for i in range(1, 6)]
    for c in (local, remote):  # examples by id may come from another collection (lookup_from)
        c.create_collection(other, vectors_config={"v": models.VectorParams(size=4, distance=models.Distance.COSINE)})
        c.upsert(other, points=lookup_points, wait=True)
    for name, params in VECTORS.items():
        having = [p.id for p in pts if name in p.vector]
        ids = rng.sample(having, 6)
        vec = [rng.uniform(-1, 1) for _ in range(params.size)]
        queries = [
            models.NearestQuery(nearest=ids[0]),
            models.RecommendQuery(recommend=models.RecommendInput(positive=ids[:2], negative=[ids[2]])),
            models.RecommendQuery(recommend=models.RecommendInput(positive=[ids[0], vec])),
            models.RecommendQuery(recommend=models.RecommendInput(positive=ids[:2], negative=[vec],
                                                                  strategy=models.RecommendStrategy.BEST_SCORE)),
            models.RecommendQuery(recommend=models.RecommendInput(negative=[ids[3]], strategy=models.RecommendStrategy.BEST_SCORE)),
            models.RecommendQuery(recommend=models.RecommendInput(positive=ids[:3], negative=ids[3:5],
                                                                  strategy=models.RecommendStrategy.SUM_SCORES)),
            models.DiscoverQuery(discover=models.DiscoverInput(target=ids[0], context=[
                models.ContextPair(positive=ids[1], negative=ids[2]), models.ContextPair(positive=vec, negative=ids[4])])),
            models.DiscoverQuery(discover=models.DiscoverInput(target=vec, context=[])),
        ]
        for flt in (None, filters(ids)[0]):
            for query in queries:
                want = local.query_points(collection_name, query=query, using=name, query_filter=flt, limit=25).points
                got = remote.query_points(collection_name, query=query, using=name, query_filter=flt, limit=25).points
                assert [p.id for p in got] == [p.id for p in want], (name, query)
                for g, w in zip(got, want):
                    assert math.isclose(g.score, w.score, rel_tol=1e-4, abs_tol=1e-5), (name, query, g.id, g.score, w.score)
        # Context: many points tie at 0 (on the positive side of every pair): scores agree, ids as sets per score.
        context = models.ContextQuery(context=[models.ContextPair(positive=ids[0], negative=ids[1]),
                                               models.ContextPair(positive=ids[2], negative=vec)])
        want = local.query_points(collection_name, query=context, using=name, limit=len(pts)).points
        got = remote.query_points(collection_name, query=context, using=name, limit=len(pts)).points
        assert len(got) == len(want) == len(having) - 3  # the three points named are left out
        assert all(math.isclose(g.score, w.score, rel_tol=1e-4, abs_tol=1e-5) for g, w in zip(got, want))
        assert {p.id for p in got} == {p.id for p in want}
    # lookup_from: the example is another collection's point, which is not left out of this one's answer.
    for name in ("text",):
        query = models.RecommendQuery(recommend=models.RecommendInput(positive=[1, 2], negative=[3]))
        lookup = models.LookupLocation(collection=other, vector="v")
        want = local.query_points(collection_name, query=query, using=name, lookup_from=lookup, limit=10).points
        got = remote.query_points(collection_name, query=query, using=name, lookup_from=lookup, limit=10).points
        assert [p.id for p in got] == [p.id for p in want]
    # An example that does not exist, or lacks the vector: 4xx.
    missing = next(p.id for p in pts if "image" not in p.vector)
    for query, status in [(models.NearestQuery(nearest=987654321), 404),
                          (models.RecommendQuery(recommend=models.RecommendInput(positive=[missing])), 400)]:
        r = httpx.post(f"{server.qdrant}/collections/{collection_name}/points/query",
                       json={"query": query.model_dump(exclude_none=True), "using": "image"},
                       headers={"api-key": server.api_key}, timeout=60)
        assert r.status_code == status, r.text
        assert "error" in r.json()["status"]


def test_with_vector_names_and_the_named_batch_form(both, collection_name: str, server: Server) -> None:
    local, remote, pts = both
    ids = [p.id for p in pts][:20]
    for names in (["image", "code"], ["text"], []):
        want = {p.id: p.vector for p in local.retrieve(collection_name, ids=ids, with_vectors=names or False)}
        got = {p.id: p.vector for p in remote.retrieve(collection_name, ids=ids, with_vectors=names or False)}
        assert {k: (sorted(v) if v else v) for k, v in got.items()} == {k: (sorted(v) if v else v) for k, v in want.items()}, names
    # The batch form: a list per vector name, a null where a point lacks that vector.
    batch = models.Batch(ids=[20_001, 20_002], vectors={"code": [[1.0, 2.0], [3.0, 4.0]], "image": [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]},
                         payloads=[{"n": 1}, {"n": 2}])
    for c in (local, remote):
        c.upsert(collection_name, points=batch, wait=True)
    assert ({p.id: sorted(p.vector) for p in remote.retrieve(collection_name, ids=[20_001, 20_002], with_vectors=True)}
            == {20_001: ["code", "image"], 20_002: ["code", "image"]})
    # Points given as numbers are not bounded by the Documents-per-request limit.
    many = [models.PointStruct(id=30_000 + i, vector={"code": [float(i), 1.0]}) for i in range(1500)]
    remote.upsert(collection_name, points=many, wait=True)
    assert remote.count(collection_name).count == len(pts) + 2 + 1500


def test_facets_and_order_by_agree_with_local_mode(both, collection_name: str) -> None:
    local, remote, pts = both
    for key in ("word", "tags", "city.name", "visits[].rating", "n"):
        for flt in (None, filters([p.id for p in pts])[7]):
            want = local.facet(collection_name, key=key, facet_filter=flt, limit=4)
            got = remote.facet(collection_name, key=key, facet_filter=flt, limit=4)
            assert [(h.value, h.count) for h in got.hits] == [(h.value, h.count) for h in want.hits], (key, flt)
    for order in (models.OrderBy(key="n"), models.OrderBy(key="n", direction=models.Direction.DESC, start_from=60),
                  models.OrderBy(key="visits[].year", start_from=2010), models.OrderBy(key="at", direction=models.Direction.DESC)):
        for flt in (None, filters([p.id for p in pts])[0]):
            want, _ = local.scroll(collection_name, order_by=order, scroll_filter=flt, limit=15)
            got, offset = remote.scroll(collection_name, order_by=order, scroll_filter=flt, limit=15)
            assert offset is None
            # The values in order; among equal values moeedb answers in id order, local mode in insertion order.
            assert [p.order_value for p in got] == [p.order_value for p in want], order
            last = want[-1].order_value if want else None
            ties = lambda ps: {(p.order_value, p.id) for p in ps if p.order_value != last}
            assert ties(got) == ties(want), order
    # A point without vectors at all: a collection of vectors {} holds payloads.
    empty = collection_name + "_payload_only"
    for c in (local, remote):
        c.create_collection(empty, vectors_config={})
        c.upsert(empty, points=[models.PointStruct(id=i, vector={}, payload={"k": [i, i + 1]}) for i in range(1, 4)], wait=True)
    order = models.OrderBy(key="k", direction=models.Direction.DESC)
    assert ([(p.id, p.order_value) for p in remote.scroll(empty, order_by=order, limit=10)[0]]
            == [(p.id, p.order_value) for p in local.scroll(empty, order_by=order, limit=10)[0]])


def test_the_collections_api_facets_and_orders_as_qdrants_port(both, collection_name: str, server: Server) -> None:
    # The same service-layer facets and ordering under moeedb's own API, in its own filter language.
    local, remote, pts = both
    from e2e_util import api

    want = local.facet(collection_name, key="tags", limit=3,
                       facet_filter=models.Filter(must=[field("n", range=models.Range(gte=20, lt=50))]))
    r = api(server, "POST", f"/collections/{collection_name}/facet",
            {"key": "tags", "limit": 3, "filter": {"n": {"$gte": 20, "$lt": 50}}})
    assert r.status_code == 200, r.text
    assert [(h["value"], h["count"]) for h in r.json()["hits"]] == [(h.value, h.count) for h in want.hits]
    want, _ = local.scroll(collection_name, order_by=models.OrderBy(key="n", direction=models.Direction.DESC), limit=5,
                           scroll_filter=models.Filter(must=[field("word", match=models.MatchValue(value="cat"))]))
    r = api(server, "POST", f"/collections/{collection_name}/documents/scroll",
            {"order_by": {"key": "n", "direction": "desc"}, "limit": 5, "filter": {"word": "cat"}})
    assert r.status_code == 200, r.text
    assert [(d["id"], d["order_value"]) for d in r.json()["documents"]] == [(str(p.id), p.order_value) for p in want]
    # Paging by id with a filter visits every kept document once, in Qdrant's id order.
    seen, after = [], None
    while True:
        body = {"limit": 7, "filter": {"word": "cat"}} | ({"after": after} if after else {})
        page = api(server, "POST", f"/collections/{collection_name}/documents/scroll", body).json()
        seen += [d["id"] for d in page["documents"]]
        after = page["next_after"]
        if after is None:
            break
    cats = scroll_all(local, collection_name, models.Filter(must=[field("word", match=models.MatchValue(value="cat"))]))
    assert seen == [str(i) for i in cats]
    for body in ({"key": "a[x]"}, {"key": "n", "limit": -1}, {"key": "n", "colour": 1}):
        r = api(server, "POST", f"/collections/{collection_name}/facet", body)
        assert r.status_code == 400 and "error" in r.json(), r.text
    # Groups: the search's hits grouped by a payload field, as Qdrant's port groups them.
    q = [0.3, -0.2, 0.5, 0.1]
    want = local.query_points_groups(collection_name, query=q, using="text", group_by="word", group_size=2, limit=4,
                                     query_filter=models.Filter(must=[field("n", range=models.Range(lt=60))])).groups
    r = api(server, "POST", f"/collections/{collection_name}/search",
            {"vector": q, "using": "text", "group_by": "word", "group_size": 2, "k": 4, "filter": {"n": {"$lt": 60}}})
    assert r.status_code == 200, r.text
    got = r.json()["groups"]
    assert [g["value"] for g in got] == [g.id for g in want]
    assert [[h["id"] for h in g["hits"]] for g in got] == [[str(h.id) for h in g.hits] for g in want]
    r = api(server, "POST", f"/collections/{collection_name}/search", {"vector": q, "using": "text", "group_size": 2})
    assert r.status_code == 400 and "group_by" in r.text


def test_groups_and_the_distance_matrix_agree_with_local_mode(both, collection_name: str) -> None:
    local, remote, pts = both
    rng = random.Random(9)
    lookup = collection_name + "_cities"
    for c in (local, remote):  # group ids looked up as another collection's points
        c.create_collection(lookup, vectors_config={})
        c.upsert(lookup, points=[models.PointStruct(id=i, vector={}, payload={"rating": i}) for i in range(1, 6)], wait=True)
    for name, params in VECTORS.items():
        q = [rng.uniform(-1, 1) for _ in range(params.size)]
        for group_by, size, limit in (("word", 2, 4), ("tags", 3, 10), ("visits[].rating", 1, 3)):
            kwargs = dict(query=q, using=name, group_by=group_by, group_size=size, limit=limit, with_payload=["n"])
            if group_by.startswith("visits"):
                kwargs["with_lookup"] = models.WithLookup(collection=lookup, with_payload=True)
            want = local.query_points_groups(collection_name, **kwargs).groups
            got = remote.query_points_groups(collection_name, **kwargs).groups
            if group_by == "tags":  # a point with several tags opens their groups in Python's set order
                got, want = sorted(got, key=lambda g: g.id), sorted(want, key=lambda g: g.id)
            assert [g.id for g in got] == [g.id for g in want], (name, group_by)
            for g, w in zip(got, want):
                assert [(h.id, h.payload) for h in g.hits] == [(h.id, h.payload) for h in w.hits], (name, group_by, g.id)
                assert all(math.isclose(a.score, b.score, rel_tol=1e-4, abs_tol=1e-5) for a, b in zip(g.hits, w.hits))
                if "with_lookup" in kwargs:
                    assert (g.lookup.payload if g.lookup else None) == (w.lookup.payload if w.lookup else None)
        # Integer ids of points with the vector only: local mode sorts the sample by id (which fails
        # on mixed ids) and reads the vector of every point sampled (which fails on one without it).
        integers = models.HasIdCondition(has_id=[p.id for p in pts if isinstance(p.id, int) and name in p.vector])
        flt = models.Filter(must=[integers, field("word", match=models.MatchAny(any=["cat", "dog"]))])
        have = sum(1 for p in pts if name in p.vector)
        want = local.search_matrix_offsets(collection_name, sample=have, limit=3, using=name, query_filter=flt)
        got = remote.search_matrix_offsets(collection_name, sample=have, limit=3, using=name, query_filter=flt)
        assert len(got.ids) > 5
        assert got.ids == want.ids and got.offsets_row == want.offsets_row and got.offsets_col == want.offsets_col, name
        assert all(math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-5) for a, b in zip(got.scores, want.scores))
        only = models.Filter(must=[integers])
        pairs = remote.search_matrix_pairs(collection_name, sample=have, limit=2, using=name, query_filter=only).pairs
        want_pairs = local.search_matrix_pairs(collection_name, sample=have, limit=2, using=name, query_filter=only).pairs
        assert [(p.a, p.b) for p in pairs] == [(p.a, p.b) for p in want_pairs]
        # A smaller sample: that many points, each with its nearest among them.
        small = remote.search_matrix_offsets(collection_name, sample=5, limit=2, using=name)
        assert len(small.ids) == 5 and len(small.scores) == 10 and set(small.offsets_col) <= set(range(5))


def test_conditional_upserts_write_what_local_mode_writes(both, collection_name: str) -> None:
    local, remote, pts = both
    ids = [p.id for p in pts]
    cats = models.Filter(must=[field("word", match=models.MatchValue(value="cat"))])
    changed = lambda pid, n: models.PointStruct(id=pid, vector={"code": [float(n), 1.0]}, payload={"n": n, "word": "changed"})
    for c in (local, remote):
        c.upsert(collection_name, points=[changed(ids[0], -1), changed(50_000, -2)], update_mode=models.UpdateMode.INSERT_ONLY, wait=True)
        c.upsert(collection_name, points=[changed(ids[1], -3), changed(50_001, -4)], update_mode=models.UpdateMode.UPDATE_ONLY, wait=True)
        c.upsert(collection_name, points=[changed(pid, -5) for pid in ids[2:30]], update_filter=cats, wait=True)
        # The points the filter keeps first: local mode stops at the first point its filter refuses
        # (Qdrant itself goes on), so the rest come after it.
        window = sorted(pts[30:60], key=lambda p: p.payload.get("word") != "cat")
        c.update_vectors(collection_name, points=[models.PointVectors(id=p.id, vector={"code": [9.0, 9.0]}) for p in window],
                         update_filter=cats, wait=True)

    def everything(c: QdrantClient) -> list[tuple]:
        out, offset = [], None
        while True:
            page, offset = c.scroll(collection_name, limit=50, offset=offset, with_vectors=["code"])
            out += [(p.id, p.payload, (p.vector or {}).get("code")) for p in page]
            if offset is None:
                return out

    got, want = everything(remote), everything(local)
    assert got == want
    assert sum(1 for g in got if g[1].get("word") == "changed") > 2  # the filter let some through, not all


def test_fusions_nested_prefetches_and_vectorless_queries_agree_with_local_mode(both, collection_name: str) -> None:
    local, remote, pts = both
    rng = random.Random(13)
    q = {name: [rng.uniform(-1, 1) for _ in range(p.size)] for name, p in VECTORS.items()}
    prefetch = [models.Prefetch(query=q["text"], using="text", limit=30), models.Prefetch(query=q["code"], using="code", limit=30)]
    nested = [models.Prefetch(prefetch=prefetch, query=models.FusionQuery(fusion=models.Fusion.RRF), limit=25),
              models.Prefetch(query=q["image"], using="image", limit=20)]
    cases = [
        dict(prefetch=prefetch, query=models.FusionQuery(fusion=models.Fusion.RRF)),
        dict(prefetch=prefetch, query=models.FusionQuery(fusion=models.Fusion.DBSF)),
        dict(prefetch=nested, query=models.FusionQuery(fusion=models.Fusion.DBSF)),
        dict(prefetch=[models.Prefetch(prefetch=prefetch, query=q["image"], using="image", limit=10)], query=q["text"], using="text"),
        dict(prefetch=prefetch, query=models.OrderByQuery(order_by=models.OrderBy(key="n", direction=models.Direction.DESC))),
        dict(query=models.OrderByQuery(order_by="n"), query_filter=filters([])[0]),
        dict(query=None, offset=5),
    ]
    for case in cases:
        want = local.query_points(collection_name, limit=12, **case).points
        got = remote.query_points(collection_name, limit=12, **case).points
        assert [p.id for p in got] == [p.id for p in want], case
        for g, w in zip(got, want):
            assert math.isclose(g.score, w.score, rel_tol=1e-4, abs_tol=1e-5), (case, g.id, g.score, w.score)
            assert g.order_value == w.order_value
    # A random sample: that many distinct points the filter keeps.
    flt = filters([])[7]
    kept = {p.id for p in local.query_points(collection_name, query_filter=flt, limit=len(pts)).points}
    sample = remote.query_points(collection_name, query=models.SampleQuery(sample=models.Sample.RANDOM), query_filter=flt, limit=5).points
    assert len({p.id for p in sample}) == 5 and {p.id for p in sample} <= kept


def test_a_prefetch_score_threshold_keeps_what_local_mode_keeps(both, collection_name: str) -> None:
    local, remote, _ = both
    rng = random.Random(17)
    for name, threshold in (("text", 0.3), ("image", 0.9)):  # Cosine: at least it; Euclid: a distance at most it
        q = [rng.uniform(-1, 1) for _ in range(VECTORS[name].size)]
        case = dict(prefetch=[models.Prefetch(query=q, using=name, limit=40, score_threshold=threshold)],
                    query=models.FusionQuery(fusion=models.Fusion.RRF), limit=40)
        want = [p.id for p in local.query_points(collection_name, **case).points]
        got = [p.id for p in remote.query_points(collection_name, **case).points]
        assert 0 < len(want) < 40 and got == want, name


def test_payload_indexes_leave_every_filtered_answer_as_local_mode(both, collection_name: str) -> None:
    # Local mode keeps no payload index; moeedb's narrows the candidates by
    # it. Every filter must still rank, count and scroll as local mode does.
    local, remote, pts = both
    for key, schema in [("word", models.PayloadSchemaType.KEYWORD), ("tags", models.PayloadSchemaType.KEYWORD),
                        ("n", models.PayloadSchemaType.INTEGER), ("city.name", models.PayloadSchemaType.KEYWORD),
                        ("visits[].year", models.PayloadSchemaType.INTEGER),
                        ("at", models.PayloadSchemaType.DATETIME), ("maybe", models.PayloadSchemaType.KEYWORD)]:
        remote.create_payload_index(collection_name, key, schema, wait=True)
    schema = remote.get_collection(collection_name).payload_schema
    assert schema["n"].points == len(pts)
    assert schema["word"].points == sum(1 for p in pts if "word" in p.payload)
    rng = random.Random(5)
    for i, flt in enumerate(filters([p.id for p in pts])):
        assert scroll_all(remote, collection_name, flt) == scroll_all(local, collection_name, flt), f"filter {i}"
        for name, params in VECTORS.items():
            q = [rng.uniform(-1, 1) for _ in range(params.size)]
            want = local.query_points(collection_name, query=q, using=name, query_filter=flt, limit=10).points
            got = remote.query_points(collection_name, query=q, using=name, query_filter=flt, limit=10).points
            assert [p.id for p in got] == [p.id for p in want], (i, name, flt)
    # A write after the index: the changed point is found through it at once.
    target = pts[5].id
    for c in (local, remote):
        c.set_payload(collection_name, {"word": "yak"}, points=[target], wait=True)
    yak = models.Filter(must=[field("word", match=models.MatchValue(value="yak"))])
    assert scroll_all(remote, collection_name, yak) == scroll_all(local, collection_name, yak) == [target]


def test_aliases_switch_at_once_and_answer_for_their_collection(server: Server, collection_name: str) -> None:
    remote = QdrantClient(url=server.qdrant, api_key=server.api_key, timeout=120)
    local = QdrantClient(":memory:")
    other = collection_name + "_b"
    pts = points(n=20)
    for c in (local, remote):
        for name in (collection_name, other):
            c.create_collection(name, vectors_config=VECTORS)
        c.upsert(collection_name, points=pts[:10], wait=True)
        c.upsert(other, points=pts[10:], wait=True)

    def aliases(c: QdrantClient) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        every = sorted((a.alias_name, a.collection_name) for a in c.get_aliases().aliases)
        own = sorted((a.alias_name, a.collection_name) for a in c.get_collection_aliases(other).aliases)
        return every, own

    def change(*ops: models.CreateAliasOperation | models.DeleteAliasOperation | models.RenameAliasOperation) -> None:
        for c in (local, remote):
            c.update_collection_aliases(change_aliases_operations=list(ops))
        assert aliases(remote) == aliases(local)

    create = lambda alias, name: models.CreateAliasOperation(  # noqa: E731
        create_alias=models.CreateAlias(collection_name=name, alias_name=alias))
    change(create("live", collection_name), create("spare", collection_name))
    assert [p.id for p in remote.scroll("live", limit=50)[0]] == [p.id for p in local.scroll("live", limit=50)[0]]
    # The switch: one request moves "live" to the other collection.
    change(models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name="live")), create("live", other))
    assert remote.count("live").count == 10
    assert {p.id for p in remote.scroll("live", limit=50)[0]} == {p.id for p in pts[10:]}
    q = [0.1, 0.2, 0.3, 0.4]
    assert ([p.id for p in remote.query_points("live", query=q, using="text", limit=5).points] ==
            [p.id for p in local.query_points("live", query=q, using="text", limit=5).points])
    change(models.RenameAliasOperation(rename_alias=models.RenameAlias(old_alias_name="spare", new_alias_name="kept")))
    # All or nothing: a batch with a bad action changes nothing.
    before = aliases(remote)
    with pytest.raises(Exception):
        remote.update_collection_aliases(change_aliases_operations=[create("x", other), create("y", "no_such_collection")])
    assert aliases(remote) == before
    # An alias may not take a collection's name, nor a collection an alias's.
    bad = httpx.post(f"{server.qdrant}/collections/aliases", headers={"api-key": server.api_key}, timeout=60,
                     json={"actions": [{"create_alias": {"collection_name": other, "alias_name": collection_name}}]})
    assert bad.status_code == 400 and "collection" in bad.json()["status"]["error"]
    with pytest.raises(Exception):
        remote.create_collection("live", vectors_config=VECTORS)
    # Dropping a collection takes its aliases with it.
    for c in (local, remote):
        c.delete_collection(other)
    assert sorted((a.alias_name, a.collection_name) for a in remote.get_aliases().aliases) == [("kept", collection_name)]
    remote.delete_collection(collection_name)


def test_relevance_feedback_and_groups_over_nested_prefetches_agree_with_local_mode(both, collection_name: str) -> None:
    local, remote, pts = both
    rng = random.Random(11)
    with_text = [p.id for p in pts if "text" in p.vector]
    for a, b, c in ((0.5, 1.0, 0.7), (1.0, 2.0, 0.2)):
        q = [rng.uniform(-1, 1) for _ in range(4)]
        feedback = [models.FeedbackItem(example=pid, score=s) for pid, s in zip(with_text[:4], (0.9, 0.8, 0.1, 0.6))]
        feedback.append(models.FeedbackItem(example=[rng.uniform(-1, 1) for _ in range(4)], score=0.3))
        query = models.RelevanceFeedbackQuery(relevance_feedback=models.RelevanceFeedbackInput(
            target=q, feedback=feedback, strategy=models.NaiveFeedbackStrategy(naive=models.NaiveFeedbackStrategyParams(a=a, b=b, c=c))))
        want = local.query_points(collection_name, query=query, using="text", limit=15).points
        got = remote.query_points(collection_name, query=query, using="text", limit=15).points
        assert [p.id for p in got] == [p.id for p in want], (a, b, c)  # the examples given by id left out
        assert all(math.isclose(g.score, w.score, rel_tol=1e-4, abs_tol=1e-5) for g, w in zip(got, want))
    # A group query over a prefetch with a prefetch of its own: every limit on the way is
    # raised, so a group's hits come from every point the prefetches reach.
    q1, q2 = [rng.uniform(-1, 1) for _ in range(4)], [rng.uniform(-1, 1) for _ in range(4)]
    prefetch = models.Prefetch(query=q1, using="text", limit=5,
                               prefetch=[models.Prefetch(query=q1, using="text", limit=7)])
    kwargs = dict(prefetch=prefetch, query=q2, using="text", group_by="word", group_size=4, limit=3, with_payload=["word"])
    want = local.query_points_groups(collection_name, **kwargs).groups
    got = remote.query_points_groups(collection_name, **kwargs).groups
    assert [g.id for g in got] == [g.id for g in want]
    assert [[h.id for h in g.hits] for g in got] == [[h.id for h in g.hits] for g in want]
    assert sum(len(g.hits) for g in got) > 7, "the nested limit of 7 was kept"


def test_formulas_over_payloads_conditions_and_decays_score_as_local_mode(both, collection_name: str, server: Server) -> None:
    local, remote, pts = both
    q = [0.3, -0.2, 0.5, 0.1]
    prefetch = models.Prefetch(query=q, using="text", limit=40)
    cat = models.FieldCondition(key="word", match=models.MatchValue(value="cat"))
    formulas = [
        models.SumExpression(sum=["$score", models.MultExpression(mult=[0.01, "n"])]),
        models.SumExpression(sum=["$score", models.MultExpression(mult=[0.5, cat])]),
        models.MultExpression(mult=["$score[0]", models.GaussDecayExpression(
            gauss_decay=models.DecayParamsExpression(x="n", target=40, scale=10))]),
        models.SumExpression(sum=["$score", models.NegExpression(neg=models.MultExpression(mult=[
            1e-6, models.GeoDistance(geo_distance=models.GeoDistanceParams(
                origin=models.GeoPoint(lat=52.52, lon=13.405), to="city.geo"))]))]),
        models.ExpDecayExpression(exp_decay=models.DecayParamsExpression(
            x=models.DatetimeKeyExpression(datetime_key="at"),
            target=models.DatetimeExpression(datetime="2024-05-01T00:00:00Z"), scale=1e6, midpoint=0.3)),
        models.SumExpression(sum=[models.LnExpression(ln=models.SumExpression(sum=["n", 1])),
                                  models.SqrtExpression(sqrt=models.AbsExpression(abs="$score")),
                                  models.PowExpression(pow=models.PowParams(base="$score", exponent=2)),
                                  models.LinDecayExpression(lin_decay=models.DecayParamsExpression(x="n", scale=100))]),
    ]
    for i, formula in enumerate(formulas):
        # Every prefetched point, so that points of equal score (datetimes an hour apart) compare as sets.
        query = models.FormulaQuery(formula=formula, defaults={"n": 0})
        want = local.query_points(collection_name, prefetch=prefetch, query=query, limit=40).points
        got = remote.query_points(collection_name, prefetch=prefetch, query=query, limit=40).points
        assert len(got) == len(want) == 40, i
        assert all(math.isclose(g.score, w.score, rel_tol=1e-4, abs_tol=1e-5) for g, w in zip(got, want)), i
        want_score = {w.id: w.score for w in want}
        assert {g.id for g in got} == set(want_score), i
        assert all(math.isclose(g.score, want_score[g.id], rel_tol=1e-4, abs_tol=1e-5) for g in got), i
        assert all(a.score >= b.score for a, b in zip(got, got[1:])), i
        assert len({round(w.score, 6) for w in want}) > 5, f"formula {i} ranks nothing apart"
    # A value that is not finite is an error in both, Qdrant's shape naming the cause.
    bad = models.FormulaQuery(formula=models.DivExpression(div=models.DivParams(left=1, right=models.MultExpression(mult=[0, "n"]))))
    with pytest.raises(ValueError):
        local.query_points(collection_name, prefetch=prefetch, query=bad, limit=3)
    r = httpx.post(f"{server.qdrant}/collections/{collection_name}/points/query", headers={"api-key": server.api_key}, timeout=60,
                   json={"prefetch": {"query": q, "using": "text", "limit": 5},
                         "query": {"formula": {"div": {"left": 1, "right": 0}}}})
    assert r.status_code == 400 and "produced a non-finite number" in r.json()["status"]["error"]
    # A payload value of the wrong type names the key.
    r = httpx.post(f"{server.qdrant}/collections/{collection_name}/points/query", headers={"api-key": server.api_key}, timeout=60,
                   json={"prefetch": {"query": q, "using": "text", "limit": 5}, "query": {"formula": {"sum": ["word", 1]}}})
    assert r.status_code == 400 and "word" in r.json()["status"]["error"]


def test_mmr_picks_as_local_mode_for_every_distance(both, collection_name: str) -> None:
    # Relevance and diversity on Qdrant's core scale (a Euclid search's minus squared distance).
    local, remote, pts = both
    rng = random.Random(13)
    for name, params in VECTORS.items():
        for diversity, pool in ((0.3, 30), (0.8, 20)):
            q = [rng.uniform(-1, 1) for _ in range(params.size)]
            query = models.NearestQuery(nearest=q, mmr=models.Mmr(diversity=diversity, candidates_limit=pool))
            want = local.query_points(collection_name, query=query, using=name, limit=8).points
            got = remote.query_points(collection_name, query=query, using=name, limit=8).points
            assert [p.id for p in got] == [p.id for p in want], (name, diversity)
            assert all(math.isclose(g.score, w.score, rel_tol=1e-4, abs_tol=1e-5) for g, w in zip(got, want)), name
            # A score threshold keeps the candidates it passes before the picking: some are left
            # out of the pool, and fewer than the limit may come back.
            scores = sorted(w.score for w in local.query_points(collection_name, query=q, using=name, limit=pool).points)
            threshold = (scores[len(scores) // 2] + scores[len(scores) // 2 + 1]) / 2  # between two scores
            want = local.query_points(collection_name, query=query, using=name, limit=20, score_threshold=threshold).points
            got = remote.query_points(collection_name, query=query, using=name, limit=20, score_threshold=threshold).points
            assert 0 < len(want) < pool
            assert [p.id for p in got] == [p.id for p in want], (name, diversity, threshold)
