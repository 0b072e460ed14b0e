"""moeedb.Client and moeedb.AsyncClient against the session's server (the
collections API and /v1/embeddings), and their retries against a local stub
that answers what the test scripts."""

from __future__ import annotations

import http.server
import json
import math
import socket
import threading
import time
from collections.abc import Iterator

import pytest

import moeedb
from conftest import DOCS, PARAPHRASES, Server
from moeedb import AsyncClient, Client, Document


@pytest.fixture(scope="module")
def client(server: Server) -> Iterator[Client]:
    with Client(server.base, api_key=server.api_key) as c:
        yield c


def _fill(client: Client, name: str) -> moeedb.UpsertResult:
    client.create_collection(name)
    return client.upsert(name, [Document(id=k, text=t, metadata=m) for k, t, m in DOCS])


# -- collections ------------------------------------------------------------------


def test_collections_lifecycle(client: Client, collection_name: str) -> None:
    assert not client.collection_exists(collection_name)
    assert client.create_collection(collection_name, alpha=0.5, lexical={"language": "english"}) is True
    assert client.create_collection(collection_name, exist_ok=True) is False
    with pytest.raises(moeedb.ConflictError) as conflict:
        client.create_collection(collection_name)
    assert conflict.value.status == 409 and conflict.value.message == f"collection '{collection_name}' already exists"
    info = client.get_collection(collection_name)
    assert info.name == collection_name and info.documents == 0 and info.kind == "model"
    assert info.alpha == pytest.approx(0.5) and info.lexical and info.dim_hs > 0 and info.dim_rw > 0
    assert collection_name in {c.name for c in client.list_collections()}
    assert client.delete_collection(collection_name) is True
    assert not client.collection_exists(collection_name)
    assert collection_name not in {c.name for c in client.list_collections()}
    assert client.delete_collection(collection_name, missing_ok=True) is False
    with pytest.raises(moeedb.NotFoundError) as missing:
        client.delete_collection(collection_name)
    assert missing.value.message == f"no collection named '{collection_name}'" and missing.value.type == "not_found_error"


def test_errors_carry_the_server_message(server: Server, client: Client, collection_name: str) -> None:
    with pytest.raises(moeedb.NotFoundError, match=f"no collection named '{collection_name}'") as e404:
        client.search(collection_name, "anything")
    assert e404.value.status == 404
    _fill(client, collection_name)
    try:
        with pytest.raises(moeedb.BadRequestError) as e400:
            client.search(collection_name, "anything", k=0)
        assert e400.value.status == 400 and e400.value.message == "'k' must be an integer in [1, 10000]"
        assert e400.value.type == "invalid_request_error"
        with pytest.raises(moeedb.BadRequestError, match="beta"):
            client.search(collection_name, "anything", beta=2.0)  # beta needs mode hybrid
        with pytest.raises(moeedb.NotFoundError, match="no document 'nope'") as missing_doc:
            client.get(collection_name, "nope")
        assert missing_doc.value.code == "document_not_found"
        with Client(server.base, api_key="wrong") as bad:
            with pytest.raises(moeedb.AuthenticationError) as e401:
                bad.list_collections()
        assert e401.value.status == 401 and e401.value.code == "invalid_api_key"
    finally:
        client.delete_collection(collection_name)


# -- documents and search ----------------------------------------------------------


def test_upsert_search_count_list_delete(client: Client, collection_name: str) -> None:
    r = _fill(client, collection_name)
    try:
        assert (r.upserted, r.replaced, r.durable, r.batches) == (len(DOCS), 0, True, 1) and r.seq > 0
        assert client.count(collection_name) == len(DOCS)
        for query, want in PARAPHRASES:
            result = client.search(collection_name, query, k=3)
            assert result.hits[0].id == want, query
            assert result.took_ms >= 0
        hit = client.search(collection_name, PARAPHRASES[0][0], k=1).hits[0]
        assert (hit.text, hit.metadata) == (DOCS[1][1], DOCS[1][2])
        assert hit.score == pytest.approx(hit.parts.total, abs=1e-5)
        # Replacing by id, as a dict.
        again = client.upsert(collection_name, [{"id": "bank1", "text": DOCS[1][1], "metadata": {"topic": "x"}}])
        assert (again.upserted, again.replaced) == (1, 1)
        assert client.get(collection_name, "bank1") == Document(id="bank1", text=DOCS[1][1], metadata={"topic": "x"})
        # Pages in byte order of ids, and the iterator over all.
        page = client.list_documents(collection_name, limit=4)
        assert [d.id for d in page.documents] == sorted(k for k, _, _ in DOCS)[:4] and page.total == len(DOCS)
        rest = client.list_documents(collection_name, limit=4, after=page.next_after)
        assert rest.next_after is None and len(rest.documents) == len(DOCS) - 4
        assert [d.id for d in client.iter_documents(collection_name, page_size=2)] == sorted(k for k, _, _ in DOCS)
        # Deletes: missing ids counted, not raised; a missing collection raises.
        deleted = client.delete(collection_name, ["bank1", "music1", "nope", "bank1"])
        assert (deleted.deleted, deleted.missing, deleted.ids) == (2, 1, ["bank1", "music1", "nope"])
        assert deleted.seq is not None and deleted.durable and deleted.batches == 1
        assert client.count(collection_name) == len(DOCS) - 2
        ids = client.search(collection_name, PARAPHRASES[0][0], k=10, min_seq=deleted.seq).ids
        assert set(ids) == {k for k, _, _ in DOCS} - {"bank1", "music1"}
        none = client.delete(collection_name, "nope")
        assert (none.deleted, none.missing, none.seq) == (0, 1, None)
        with pytest.raises(moeedb.NotFoundError, match="no collection") as e404:
            client.delete(collection_name + "_none", ["a"])
        assert e404.value.code == "collection_not_found"
        # By filter: one atomic write of every match; an empty filter or both forms are refused.
        by_filter = client.delete(collection_name, filter={"year": {"$gte": 2023}}, wait=False)
        assert (by_filter.deleted, by_filter.missing, by_filter.ids) == (3, 0, []) and not by_filter.durable
        assert by_filter.seq is not None and by_filter.seq > deleted.seq
        assert [d.id for d in client.iter_documents(collection_name)] == ["animal1"]
        assert client.delete(collection_name, filter={"topic": "none"}).seq is None
        for bad in ({}, {"ids": ["a"], "filter": {"topic": "x"}}, {"filter": {}}):
            with pytest.raises(ValueError):
                client.delete(collection_name, **bad)  # type: ignore[arg-type]
        assert client.count(collection_name) == 1
    finally:
        client.delete_collection(collection_name)


def test_filters_keep_exactly_what_they_should(client: Client, collection_name: str) -> None:
    _fill(client, collection_name)
    try:
        def ids(flt: dict[str, object]) -> set[str]:
            return set(client.search(collection_name, "a question", k=100, filter=flt, exact=True).ids)

        assert ids({"topic": "banking"}) == {"bank1", "bank4"}
        assert ids({"year": {"$gt": 2021, "$lte": 2023}}) == {"bank1", "travel1", "bank4"}
        assert ids({"topic": {"$in": ["music", "tech"]}}) == {"music1", "tech7"}
        assert ids({"$not": {"topic": "banking"}, "year": 2021}) == {"animal1", "music1"}
        assert ids({"$id": {"$in": ["tech7", "bank4", "zzz"]}}) == {"tech7", "bank4"}
        assert ids({"topic": "none"}) == set()
    finally:
        client.delete_collection(collection_name)


def test_alpha_modes_and_hybrid_parts(client: Client, collection_name: str) -> None:
    _fill(client, collection_name)
    try:
        query = PARAPHRASES[1][0]
        for alpha in (0.0, 0.4, 2.0):
            for h in client.search(collection_name, query, k=6, alpha=alpha).hits:
                assert h.score == pytest.approx(h.score_hs + alpha * h.score_rw, abs=1e-5)
                assert (h.parts.hs, h.parts.rw, h.parts.lex) == pytest.approx((h.score_hs, alpha * h.score_rw, 0.0),
                                                                              abs=1e-5)
        hs = client.search(collection_name, query, k=6, mode="hs").hits
        assert all(h.score == pytest.approx(h.score_hs, abs=1e-6) for h in hs)
        fusions: list[tuple[float, moeedb.Fusion]] = [(2.0, "rrf"), (16.0, "rrf"), (1.0, "weighted")]
        for beta, fusion in fusions:
            result = client.search(collection_name, "plane airport", k=6, mode="hybrid", beta=beta, fusion=fusion)
            assert result.hits[0].id == "travel1"
            for h in result.hits:
                assert h.score == pytest.approx(h.parts.hs + h.parts.rw + h.parts.lex, abs=1e-6)
            if fusion == "rrf":
                assert result.hits[0].parts.lex == pytest.approx(beta / 61.0, rel=1e-4)  # first lexically
        lexical = client.search(collection_name, "guitar", k=6, mode="lexical")
        assert lexical.ids == ["music1"] and lexical.hits[0].score == pytest.approx(lexical.hits[0].score_lex)
    finally:
        client.delete_collection(collection_name)


def test_min_seq_reads_a_write_back(client: Client, collection_name: str) -> None:
    client.create_collection(collection_name)
    try:
        first = client.upsert(collection_name, [Document("a", "The cat sleeps on the sofa.")], wait=False)
        second = client.upsert(collection_name, [Document("b", "Stock markets fell sharply today.")], wait=False)
        assert second.seq > first.seq and not second.durable
        assert set(client.search(collection_name, "cat", k=5, min_seq=second.seq).ids) == {"a", "b"}
    finally:
        client.delete_collection(collection_name)


def test_client_vectors_and_batches(server: Server, client: Client, collection_name: str) -> None:
    client.create_collection(collection_name, vector_size=2, distance="Euclid")
    try:
        docs = [Document(id=f"p{i:04d}", vector=[float(i), 0.0], metadata={"i": i}) for i in range(2500)]
        r = client.upsert(collection_name, docs)
        assert (r.upserted, r.batches) == (2500, 3)  # the server takes 1000 per request
        with Client(server.base, api_key=server.api_key, max_request_bytes=20_000) as small:
            r2 = small.upsert(collection_name, docs[:1000])
        assert r2.upserted == 1000 and r2.batches > 2 and r2.replaced == 1000
        assert client.count(collection_name) == 2500
        hits = client.search(collection_name, vector=[10.2, 0.0], k=3).hits
        assert [h.id for h in hits] == ["p0010", "p0011", "p0009"]
        assert hits[0].distance == pytest.approx(0.2, abs=1e-4)
        with pytest.raises(moeedb.BadRequestError, match="give vectors, not text"):
            client.search(collection_name, "text")
        assert client.upsert(collection_name, docs[:1001], batch_size=5000).batches == 2  # capped at 1000
        # Deletes go 1000 ids per request too.
        gone = client.delete(collection_name, [d.id for d in docs[:1500]] + ["x0", "x1"])
        assert (gone.deleted, gone.missing, gone.batches, len(gone.ids)) == (1500, 2, 2, 1502)
        assert client.delete(collection_name, filter={"i": {"$gte": 2400}}).deleted == 100
        assert client.count(collection_name) == 900
    finally:
        client.delete_collection(collection_name)


def test_codes_on_disk_and_oversample_keep_scores_exact(client: Client, collection_name: str) -> None:
    """A collection whose index keeps 1-bit codes in RAM and its rows on disk: every score
    the client gets is the cosine computed here, at any oversample; a bad one is a 400."""
    client.create_collection(collection_name, vector_size=8, distance="Cosine",
                             index={"codes": "binary", "on_disk": True, "oversample": 2})
    try:
        rows = [[math.sin(i * 0.37 + j) + (0.5 if i % 5 == 0 else 0.0) for j in range(8)] for i in range(600)]
        client.upsert(collection_name, [Document(id=f"r{i:03d}", vector=v) for i, v in enumerate(rows)])

        def cosine(a: list[float], b: list[float]) -> float:
            return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))

        query = [math.cos(j * 1.3) for j in range(8)]
        exact = client.search(collection_name, vector=query, k=10, exact=True).hits
        for oversample in (None, 1, 50):
            hits = client.search(collection_name, vector=query, k=10, oversample=oversample).hits
            assert len(hits) == 10
            for h in hits:
                assert h.score == pytest.approx(cosine(query, rows[int(h.id[1:])]), abs=1e-5)
        covering = client.search(collection_name, vector=query, k=10, oversample=1000).hits
        assert [h.id for h in covering] == [h.id for h in exact]
        with pytest.raises(moeedb.BadRequestError, match="oversample"):
            client.search(collection_name, vector=query, oversample=0.5)
    finally:
        client.delete_collection(collection_name)


def test_embed(client: Client) -> None:
    vectors = client.embed(["A dog runs.", "A dog is running."])
    assert len(vectors) == 2 and len(vectors[0]) == len(vectors[1]) > 100
    assert client.embed("one text")[0] != vectors[0]
    assert client.embed([]) == []


# -- async -------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_async_client_end_to_end(server: Server, collection_name: str) -> None:
    async with AsyncClient(server.base, api_key=server.api_key) as c:
        assert await c.create_collection(collection_name) is True
        with pytest.raises(moeedb.ConflictError):
            await c.create_collection(collection_name)
        try:
            r = await c.upsert(collection_name, [{"id": k, "text": t, "metadata": m} for k, t, m in DOCS])
            assert r.upserted == len(DOCS) and await c.count(collection_name) == len(DOCS)
            for query, want in PARAPHRASES:
                assert (await c.search(collection_name, query, k=2, min_seq=r.seq)).hits[0].id == want
            banking = await c.search(collection_name, "money", k=10, filter={"topic": "banking"})
            assert set(banking.ids) == {"bank1", "bank4"}
            hybrid = await c.search(collection_name, "debit card mail", k=3, mode="hybrid", beta=4.0)
            assert hybrid.hits[0].id == "bank4"
            assert all(h.score == pytest.approx(h.parts.total, abs=1e-6) for h in hybrid.hits)
            assert [d.id async for d in c.iter_documents(collection_name, page_size=4)] == sorted(k for k, _, _ in DOCS)
            assert (await c.get(collection_name, "tech7")).text == DOCS[3][1]
            d = await c.delete(collection_name, ["tech7", "gone"])
            assert (d.deleted, d.missing, d.ids) == (1, 1, ["tech7", "gone"])
            f = await c.delete(collection_name, filter={"topic": "banking"})
            assert (f.deleted, f.missing) == (2, 0) and f.seq is not None
            assert await c.count(collection_name) == len(DOCS) - 3
            with pytest.raises(moeedb.NotFoundError):
                await c.get(collection_name, "tech7")
            with pytest.raises(moeedb.BadRequestError, match=r"'k' must be an integer in \[1, 10000\]"):
                await c.search(collection_name, "x", k=10001)
            assert len((await c.embed(["a", "b", "c"]))) == 3
            assert collection_name in {x.name for x in await c.list_collections()}
        finally:
            assert await c.delete_collection(collection_name)
        assert not await c.collection_exists(collection_name)


def test_async_client_survives_a_new_event_loop(server: Server) -> None:
    import asyncio

    c = AsyncClient(server.base, api_key=server.api_key)
    first = asyncio.run(c.list_collections())  # each asyncio.run is a new loop: a new pool there
    second = asyncio.run(c.list_collections())
    assert isinstance(first, list) and isinstance(second, list)
    asyncio.run(c.close())  # from a third loop: the second loop's pool is dropped, not closed


# -- retries, against a stub -------------------------------------------------------


class _Stub:
    """A local HTTP server answering a script of (status, headers, body), then 200s."""

    def __init__(self) -> None:
        self.script: list[tuple[int, dict[str, str], dict[str, object]]] = []
        self.requests: list[tuple[str, str, float]] = []
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                stub.requests.append((self.command, self.path, time.monotonic()))
                status, headers, body = stub.script.pop(0) if stub.script else (200, {}, {"collections": []})
                data = json.dumps(body).encode()
                self.send_response(status)
                for k, v in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _answer

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()


def _error(status: int, err_type: str, message: str, **headers: str) -> tuple[int, dict[str, str], dict[str, object]]:
    return status, headers, {"error": {"message": message, "type": err_type, "code": None}}


@pytest.fixture()
def stub() -> Iterator[_Stub]:
    s = _Stub()
    try:
        yield s
    finally:
        s.server.shutdown()
        s.server.server_close()


def test_503_with_retry_after_is_retried(stub: _Stub) -> None:
    stub.script = [_error(503, "unavailable_error", "no primary", **{"Retry-After": "1"})] * 2
    with Client(stub.url, max_retries=3, retry_backoff=0.01) as c:
        assert c.list_collections() == []
    assert len(stub.requests) == 3
    gaps = [b[2] - a[2] for a, b in zip(stub.requests, stub.requests[1:])]
    assert all(g >= 0.95 for g in gaps), gaps  # Retry-After: 1 honoured over a 10 ms backoff


def test_429_is_retried_with_backoff_and_gives_up(stub: _Stub) -> None:
    stub.script = [_error(429, "rate_limit_error", "queue full")] * 3
    with Client(stub.url, max_retries=2, retry_backoff=0.05) as c:
        with pytest.raises(moeedb.RateLimitError, match="queue full") as e:
            c.list_collections()
    assert e.value.status == 429 and len(stub.requests) == 3
    gaps = [b[2] - a[2] for a, b in zip(stub.requests, stub.requests[1:])]
    assert gaps[0] >= 0.045 and gaps[1] >= 0.095  # 0.05, then doubled


def test_outcome_unknown_is_not_retried(stub: _Stub) -> None:
    stub.script = [_error(503, "outcome_unknown_error", "commit answer lost", **{"Retry-After": "1"})]
    with Client(stub.url, max_retries=3, retry_backoff=0.01) as c:
        with pytest.raises(moeedb.OutcomeUnknownError, match="commit answer lost") as e:
            c.upsert("c", [Document("a", "x")])
    assert not isinstance(e.value, moeedb.UnavailableError) and isinstance(e.value, moeedb.ServerError)
    assert len(stub.requests) == 1


def test_400_and_500_are_not_retried(stub: _Stub) -> None:
    stub.script = [_error(400, "invalid_request_error", "bad k"), _error(500, "server_error", "boom")]
    with Client(stub.url, max_retries=3, retry_backoff=0.01) as c:
        with pytest.raises(moeedb.BadRequestError, match="bad k"):
            c.search("c", "q", k=0)
        assert len(stub.requests) == 1
        with pytest.raises(moeedb.ServerError, match="boom"):
            c.list_collections()
    assert len(stub.requests) == 2


def test_max_retries_zero_and_non_json_errors(stub: _Stub) -> None:
    stub.script = [(503, {"Retry-After": "0"}, {"error": "plain shape"})]
    with Client(stub.url, max_retries=0) as c:
        with pytest.raises(moeedb.UnavailableError, match="plain shape") as e:
            c.list_collections()
    assert e.value.retry_after == 0.0 and len(stub.requests) == 1


@pytest.mark.asyncio
async def test_async_retries(stub: _Stub) -> None:
    stub.script = [_error(503, "unavailable_error", "no primary", **{"Retry-After": "0"}),
                   _error(429, "rate_limit_error", "queue full"),
                   _error(503, "outcome_unknown_error", "lost")]
    async with AsyncClient(stub.url, max_retries=3, retry_backoff=0.01) as c:
        with pytest.raises(moeedb.OutcomeUnknownError):
            await c.list_collections()
        assert len(stub.requests) == 3
        assert await c.list_collections() == []


def test_batches_are_retried_one_by_one(stub: _Stub) -> None:
    ok = (200, {}, {"upserted": 1000, "replaced": 0, "durable": True, "seq": 7})
    stub.script = [ok, _error(503, "unavailable_error", "no primary", **{"Retry-After": "0"}),
                   (200, {}, {"upserted": 500, "replaced": 2, "durable": True, "seq": 8}),
                   (200, {}, {"deleted": 1000, "missing": 0, "durable": True, "seq": 9}),
                   (200, {}, {"deleted": 0, "missing": 1, "durable": True, "seq": 0})]
    with Client(stub.url, max_retries=3, retry_backoff=0.01) as c:
        r = c.upsert("c", [Document(f"d{i}", "x") for i in range(1500)])
        assert (r.upserted, r.replaced, r.seq, r.batches) == (1500, 2, 8, 2)
        d = c.delete("c", [f"d{i}" for i in range(1001)])
        assert (d.deleted, d.missing, d.seq, d.batches) == (1000, 1, 9, 2)
    assert [(m, p) for m, p, _ in stub.requests] == [("POST", "/collections/c/documents")] * 3 + [
        ("POST", "/collections/c/documents/delete")] * 2


@pytest.mark.asyncio
async def test_async_batches_are_retried_one_by_one(stub: _Stub) -> None:
    stub.script = [(200, {}, {"data": [{"index": 0, "embedding": [1.0]}]}),
                   _error(429, "rate_limit_error", "queue full"),
                   (200, {}, {"data": [{"index": 0, "embedding": [2.0]}]})]
    async with AsyncClient(stub.url, max_retries=3, retry_backoff=0.01) as c:
        assert await c.embed(["a", "b"], batch_size=1) == [[1.0], [2.0]]
    assert len(stub.requests) == 3


def test_connection_refused_is_a_connection_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    with Client(f"http://127.0.0.1:{port}", max_retries=3, timeout=5) as c:
        with pytest.raises(moeedb.MoeedbConnectionError):
            c.list_collections()


def test_retry_after_parsing() -> None:
    from moeedb.retry import RetryPolicy, parse_retry_after

    assert parse_retry_after("3") == 3.0 and parse_retry_after(" 0.5 ") == 0.5
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None and parse_retry_after("-1") is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past
    policy = RetryPolicy(max_retries=2, backoff=0.5)
    busy = moeedb.UnavailableError("x", status=503, retry_after=2.0)
    assert policy.delay(0, busy) == 2.0 and policy.delay(1, busy) == 2.0 and policy.delay(2, busy) is None
    assert policy.delay(1, moeedb.RateLimitError("x", status=429)) == 1.0
    assert policy.delay(0, moeedb.OutcomeUnknownError("x", status=503)) is None
    assert math.isclose(RetryPolicy(max_retries=9, backoff=1, max_backoff=4).delay(5, busy) or 0, 4.0)
