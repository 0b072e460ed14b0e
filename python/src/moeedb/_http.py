"""What both clients do with HTTP: headers, encoding, reading answers and errors,
and `Exchange`, which carries out a call or a plan (`_wire`) with retries."""

from __future__ import annotations

import json
from collections.abc import Generator, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import httpx

from moeedb._version import __version__
from moeedb._wire import Call, Operation, Plan
from moeedb.batching import encode_json
from moeedb.errors import MoeedbConnectionError, MoeedbError, error_from_response
from moeedb.retry import RetryPolicy, parse_retry_after

T = TypeVar("T")

DEFAULT_URL = "http://127.0.0.1:8080"
DEFAULT_TIMEOUT = 60.0


def base_url(url: str) -> str:
    """The server's root URL without a trailing slash."""
    if not url or "://" not in url:
        raise ValueError(f"url must be an http(s) URL such as {DEFAULT_URL}, got {url!r}")
    return url.rstrip("/")


def headers(api_key: str | None, extra: Mapping[str, str] | None) -> dict[str, str]:
    """The headers of every request: the API key as a bearer token, the client's name."""
    out = {"User-Agent": f"moeedb-python/{__version__}", "Accept": "application/json"}
    if api_key:
        out["Authorization"] = f"Bearer {api_key}"
    if extra:
        out.update(extra)
    return out


def request_content(body: Any) -> tuple[bytes | None, dict[str, str]]:
    """The body bytes and content headers of a JSON body (None: no body)."""
    if body is None:
        return None, {}
    return encode_json(body), {"Content-Type": "application/json"}


def read_answer(response: httpx.Response) -> Any:
    """The JSON of a successful answer; the matching `MoeedbError` otherwise."""
    if response.status_code >= 400:
        raise error_from_response(
            response.status_code, response.content, parse_retry_after(response.headers.get("retry-after"))
        )
    if not response.content:
        return {}
    try:
        return json.loads(response.content)
    except ValueError as e:
        raise MoeedbError(f"the server's answer is not JSON: {response.text[:200]!r}",
                          status=response.status_code) from e


def connection_error(error: httpx.TransportError, method: str, url: str) -> MoeedbConnectionError:
    """A transport failure (refused, reset, timed out) as a `MoeedbConnectionError`."""
    kind = "timed out" if isinstance(error, httpx.TimeoutException) else "failed"
    return MoeedbConnectionError(f"{method} {url} {kind}: {error!s} ({type(error).__name__})")


@dataclass(frozen=True)
class Request:
    """One HTTP request for a client to send, `delay` seconds from now (a retry's wait)."""

    method: str
    path: str
    params: Mapping[str, str] | None
    content: bytes | None
    headers: dict[str, str]
    delay: float = 0.0

    @contextmanager
    def sending(self, url: str) -> Iterator[None]:
        """Around the send: a transport failure raises `MoeedbConnectionError`."""
        try:
            yield
        except httpx.TransportError as e:
            raise connection_error(e, self.method, url + self.path) from e


class Exchange(Generic[T]):
    """An operation (a `Call` or a `Plan`) as the requests a client sends, one at a time.

    Iterate: send each request (after its `delay`) and hand its response to
    `reply`; when the iteration ends, `result` is the operation's. 429 and 503
    `unavailable_error` answers are retried as `retry` says, a call's `otherwise`
    error is its result, and every other error answer is raised from the loop.
    """

    def __init__(self, operation: Operation[T], retry: RetryPolicy) -> None:
        self._plan = _single(operation) if isinstance(operation, Call) else operation
        self._retry = retry
        self._response: httpx.Response | None = None
        self._outcome: tuple[T] | None = None

    def reply(self, response: httpx.Response) -> None:
        """The response to the request the iteration gave last."""
        self._response = response

    @property
    def result(self) -> T:
        """The operation's result, once the iteration has ended."""
        if self._outcome is None:
            raise RuntimeError("the exchange is not finished")
        return self._outcome[0]

    def __iter__(self) -> Iterator[Request]:
        answer: Any = None
        while True:
            try:
                call = self._plan.send(answer)
            except StopIteration as done:
                self._outcome = (done.value,)
                return
            answer = yield from self._attempts(call)

    def _attempts(self, call: Call[Any]) -> Generator[Request, None, Any]:
        content, content_headers = request_content(call.body)
        request = Request(call.method, call.path, call.params, content, content_headers)
        attempt = 0
        while True:
            yield request
            response, self._response = self._response, None
            if response is None:
                raise RuntimeError("a request of the exchange got no reply")
            try:
                return call.parse(read_answer(response))
            except MoeedbError as e:
                if call.otherwise is not None and isinstance(e, call.otherwise[0]):
                    return call.otherwise[1]
                delay = self._retry.delay(attempt, e)
                if delay is None:
                    raise
            request = Request(call.method, call.path, call.params, content, content_headers, delay)
            attempt += 1


def _single(call: Call[T]) -> Plan[T]:
    answer: T = yield call
    return answer
