"""LlamaIndex `MetadataFilters` in moeedb's filter language (index/metadata_filter.h).

Each operator keeps LlamaIndex's meaning (as its in-memory store evaluates it):

| LlamaIndex | moeedb |
|---|---|
| `==`, `!=`, `>`, `>=`, `<`, `<=` | `$eq`, `$ne`, `$gt`, `$gte`, `$lt`, `$lte` |
| `in`, `nin` | `$in`, `$nin` |
| `any` (a list field holds one of the values) | `$in` (a list matches when an element does) |
| `all` (a list field holds every value) | `$and` of `$contains` |
| `contains` (a list field holds the value) | `$contains` |
| `text_match` (substring) | `$contains` on a string |
| `is_empty` (missing, null, `[]` or `""`) | `$empty` or `== ""` |
| condition `and` / `or` / `not` (none match) | `$and` / `$or` / `$not` of `$or` |

`text_match_insensitive` has no moeedb counterpart and raises ValueError.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.vector_stores.types import FilterCondition, FilterOperator, MetadataFilter, MetadataFilters

__all__ = ["to_moeedb_filter", "all_of"]

_COMPARE = {
    FilterOperator.EQ: "$eq",
    FilterOperator.NE: "$ne",
    FilterOperator.GT: "$gt",
    FilterOperator.GTE: "$gte",
    FilterOperator.LT: "$lt",
    FilterOperator.LTE: "$lte",
    FilterOperator.IN: "$in",
    FilterOperator.NIN: "$nin",
    FilterOperator.ANY: "$in",
    FilterOperator.CONTAINS: "$contains",
    FilterOperator.TEXT_MATCH: "$contains",
}


def _values(f: MetadataFilter) -> list[Any]:
    return list(f.value) if isinstance(f.value, (list, tuple)) else [f.value]


def _one(f: MetadataFilter) -> dict[str, Any]:
    op = f.operator
    if op in (FilterOperator.IN, FilterOperator.NIN, FilterOperator.ANY):
        return {f.key: {_COMPARE[op]: _values(f)}}
    if op in _COMPARE:
        return {f.key: {_COMPARE[op]: f.value}}
    if op == FilterOperator.ALL:
        return {"$and": [{f.key: {"$contains": v}} for v in _values(f)]}
    if op == FilterOperator.IS_EMPTY:
        return {"$or": [{f.key: {"$empty": True}}, {f.key: {"$eq": ""}}]}
    raise ValueError(f"moeedb has no filter for LlamaIndex's operator {op.value!r}")


def to_moeedb_filter(filters: MetadataFilters) -> dict[str, Any] | None:
    """The moeedb filter equivalent to `filters` (None when there is nothing to filter)."""
    parts: list[dict[str, Any]] = []
    for f in filters.filters:
        if isinstance(f, MetadataFilters):
            nested = to_moeedb_filter(f)
            if nested is not None:
                parts.append(nested)
        else:
            parts.append(_one(f))
    if not parts:
        return None
    condition = filters.condition or FilterCondition.AND
    if condition == FilterCondition.AND:
        return parts[0] if len(parts) == 1 else {"$and": parts}
    if condition == FilterCondition.OR:
        return parts[0] if len(parts) == 1 else {"$or": parts}
    if condition == FilterCondition.NOT:
        return {"$not": parts[0] if len(parts) == 1 else {"$or": parts}}
    raise ValueError(f"unknown filter condition {condition!r}")


def all_of(filters: Sequence[dict[str, Any] | None]) -> dict[str, Any] | None:
    """The conjunction of moeedb filters, leaving out the Nones (None when none is left)."""
    present = [f for f in filters if f]
    if not present:
        return None
    return present[0] if len(present) == 1 else {"$and": present}
