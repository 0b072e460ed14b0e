"""The exceptions the clients raise: one class per kind of answer.

Every error the server answers carries its message, HTTP status, error type and
code (moeedb's `{"error": {"message", "type", "code"}}`); a request that never
got an answer raises `MoeedbConnectionError`.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "MoeedbError",
    "MoeedbConnectionError",
    "BadRequestError",
    "AuthenticationError",
    "NotFoundError",
    "ConflictError",
    "RateLimitError",
    "ServerError",
    "UnavailableError",
    "OutcomeUnknownError",
]  # the error classes the package exports; error_from_response stays in this module


class MoeedbError(Exception):
    """Base of every error of this package.

    `message` is the server's own message, `status` the HTTP status (None when no
    answer came), `type` and `code` the server's error type and code, and
    `retry_after` the seconds its `Retry-After` header asked for (or None).
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        type: str | None = None,
        code: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.type = type
        self.code = code
        self.retry_after = retry_after

    def __str__(self) -> str:
        if self.status is None:
            return self.message
        kind = f" {self.type}" if self.type else ""
        return f"{self.message} (HTTP {self.status}{kind})"


class MoeedbConnectionError(MoeedbError):
    """No answer: the server could not be reached, the connection broke or timed out.

    A write that hit this may or may not have been stored (as with
    `OutcomeUnknownError`); it is never retried by the client.
    """


class BadRequestError(MoeedbError):
    """400, 413 or 422: the request is wrong (bad field, too large, too many tokens)."""


class AuthenticationError(MoeedbError):
    """401: the API key is missing or wrong."""


class NotFoundError(MoeedbError):
    """404: no such collection, document, model or route.

    `code` says which: `collection_not_found` or `document_not_found`.
    """


class ConflictError(MoeedbError):
    """409: the collection already exists."""


class RateLimitError(MoeedbError):
    """429: the server's embedding queue is full; retried by the client before raising."""


class ServerError(MoeedbError):
    """A 5xx answer; its subclasses name the 503s that have a meaning of their own."""


class UnavailableError(ServerError):
    """503 (`unavailable_error`, or too many connections): nothing was written.

    Retried by the client (honouring `Retry-After`) before it is raised.
    """


class OutcomeUnknownError(ServerError):
    """503 `outcome_unknown_error`: the store lost a write's commit answer.

    The write may or may not be stored: read it back or send it again (upserts by
    id are idempotent). Never retried by the client, on purpose.
    """


def error_from_response(status: int, body: bytes, retry_after: float | None = None) -> MoeedbError:
    """The exception for an answer of HTTP `status` (>= 400) with this body.

    The body is read as moeedb's `{"error": {"message", "type", "code"}}`; a body of
    another shape (a proxy's page, plain text) becomes the message as it is.
    `retry_after` is the answer's parsed `Retry-After` header, if any.
    """
    message, err_type, code = _parse_error_body(body)
    if not message:
        message = f"HTTP {status}"
    kwargs: dict[str, Any] = {
        "status": status,
        "type": err_type,
        "code": code,
        "retry_after": retry_after,
    }
    cls: type[MoeedbError]
    if status in (400, 413, 422):
        cls = BadRequestError
    elif status == 401:
        cls = AuthenticationError
    elif status == 404:
        cls = NotFoundError
    elif status == 409:
        cls = ConflictError
    elif status == 429:
        cls = RateLimitError
    elif status == 503:
        cls = OutcomeUnknownError if err_type == "outcome_unknown_error" else UnavailableError
    elif status >= 500:
        cls = ServerError
    else:
        cls = MoeedbError
    return cls(message, **kwargs)


def _parse_error_body(body: bytes) -> tuple[str, str | None, str | None]:
    text = body.decode("utf-8", errors="replace").strip()
    try:
        parsed = json.loads(text) if text else None
    except ValueError:
        return text[:2000], None, None
    if isinstance(parsed, dict):
        err = parsed.get("error")
        if isinstance(err, dict):
            message = err.get("message")
            err_type = err.get("type")
            code = err.get("code")
            return (
                str(message) if message is not None else text[:2000],
                str(err_type) if err_type is not None else None,
                str(code) if code is not None else None,
            )
        if isinstance(err, str):  # other protocols' shape {"error": "..."}
            return err, None, None
    return text[:2000], None, None
