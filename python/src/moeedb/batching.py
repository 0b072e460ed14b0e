"""Splitting a large write into requests the server accepts.

The server takes at most 1000 documents per upsert (1000 ids per delete) and a
body of at most `--max-body-bytes` (2,000,000 by default); larger writes are sent
as several requests, each its own atomic write.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

__all__ = ["MAX_DOCUMENTS_PER_UPSERT", "MAX_IDS_PER_DELETE", "DEFAULT_MAX_REQUEST_BYTES", "encode_json", "batches"]

MAX_DOCUMENTS_PER_UPSERT = 1000
MAX_IDS_PER_DELETE = 1000
DEFAULT_MAX_REQUEST_BYTES = 2_000_000
# Room for the envelope around the items ({"documents": [...], "wait": true}, {"ids": [...], ...}).
_ENVELOPE_BYTES = 64

T = TypeVar("T")


def encode_json(value: Any) -> bytes:
    """Compact UTF-8 JSON, as the clients send it; NaN and infinity are a ValueError."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


def batches(items: Iterable[T], *, max_items: int, max_bytes: int) -> Iterator[list[T]]:
    """Consecutive groups of `items`, each at most `max_items` long and whose JSON
    (as a list) fits in `max_bytes`. An item larger than `max_bytes` alone forms a
    group of its own (the server then answers 413)."""
    if max_items < 1:
        raise ValueError("max_items must be >= 1")
    group: list[T] = []
    size = _ENVELOPE_BYTES
    for item in items:
        item_bytes = len(encode_json(item)) + 1  # the comma
        if group and (len(group) >= max_items or size + item_bytes > max_bytes):
            yield group
            group, size = [], _ENVELOPE_BYTES
        group.append(item)
        size += item_bytes
    if group:
        yield group
