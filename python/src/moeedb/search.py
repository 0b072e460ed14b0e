"""What a search answers: ranked hits with every signal's score.

moeedb scores a document on three signals: HS (the hidden-state cosine), RW (the
routing-weight cosine) and lexical (BM25). `score_hs`, `score_rw` and `score_lex`
are each signal's own score; `parts` is each signal's share of `score` (they sum
to it): `score_hs` and `alpha * score_rw` in fused mode, weighted or reciprocal-
rank shares in hybrid mode.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["SearchMode", "Fusion", "Norm", "Using", "ScoreParts", "Hit", "SearchResult"]

SearchMode = Literal["fused", "hs", "rw", "lexical", "hybrid"]
Fusion = Literal["rrf", "weighted"]
Norm = Literal["minmax", "zscore"]
Using = Literal["hs", "rw"]


@dataclass(frozen=True)
class ScoreParts:
    """Each signal's share of a hit's score: `hs + rw + lex == score`."""

    hs: float = 0.0
    rw: float = 0.0
    lex: float = 0.0

    @property
    def total(self) -> float:
        """The sum of the parts (the hit's score, up to float rounding)."""
        return self.hs + self.rw + self.lex


@dataclass
class Hit:
    """One search hit: the document (`id`, `text`, `metadata`) and its scores.

    `score` ranks the hits (higher is better); `distance` is set only in plain
    Euclid collections (smaller is nearer).
    """

    id: str
    score: float
    score_hs: float = 0.0
    score_rw: float = 0.0
    score_lex: float = 0.0
    parts: ScoreParts = field(default_factory=ScoreParts)
    text: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    distance: float | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Hit:
        """A hit from the server's JSON."""
        parts = data.get("parts") or {}
        distance = data.get("distance")
        metadata = data.get("metadata")
        return cls(
            id=str(data["id"]),
            score=float(data.get("score", 0.0)),
            score_hs=float(data.get("score_hs", 0.0)),
            score_rw=float(data.get("score_rw", 0.0)),
            score_lex=float(data.get("score_lex", 0.0)),
            parts=ScoreParts(
                hs=float(parts.get("hs", 0.0)), rw=float(parts.get("rw", 0.0)), lex=float(parts.get("lex", 0.0))
            ),
            text=str(data.get("text") or ""),
            metadata=dict(metadata) if isinstance(metadata, Mapping) else {},
            distance=float(distance) if distance is not None else None,
        )


@dataclass
class SearchResult:
    """A search's answer: `hits`, best first, and the server's `took_ms`.

    `missing_shards` lists the shards left out of a `partial=True` search.
    """

    hits: list[Hit]
    took_ms: float = 0.0
    missing_shards: list[int] = field(default_factory=list)

    @property
    def ids(self) -> list[str]:
        """The hits' ids, best first."""
        return [h.id for h in self.hits]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SearchResult:
        """A result from the server's `{"hits", "took_ms", "missing_shards"?}`."""
        return cls(
            hits=[Hit.from_json(h) for h in data.get("hits", [])],
            took_ms=float(data.get("took_ms", 0.0)),
            missing_shards=[int(s) for s in data.get("missing_shards", [])],
        )
