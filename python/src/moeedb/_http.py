"""What both clients do with HTTP: headers, encoding, reading answers and errors."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import httpx

from moeedb._version import __version__
from moeedb.batching import encode_json
from moeedb.errors import MoeedbConnectionError, MoeedbError, error_from_response
from moeedb.retry import parse_retry_after

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
