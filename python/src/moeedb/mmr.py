"""Maximal marginal relevance over fetched candidates, computed on the client.

The collections API returns no stored vectors, so the integrations re-embed the
candidates' texts and pick, one at a time, the candidate maximising
`lambda_mult * relevance(query, c) - (1 - lambda_mult) * max similarity(c, picked)`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

__all__ = ["maximal_marginal_relevance", "cosine", "dot", "fused_similarity", "similarity_for"]

Similarity = Callable[[Sequence[float], Sequence[float]], float]


def dot(a: Sequence[float], b: Sequence[float]) -> float:
    """The inner product of two vectors of one size."""
    return math.fsum(x * y for x, y in zip(a, b, strict=True))


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine of two vectors (0 when either is zero)."""
    na, nb = math.sqrt(dot(a, a)), math.sqrt(dot(b, b))
    return dot(a, b) / (na * nb) if na > 0 and nb > 0 else 0.0


def fused_similarity(dim_hs: int, alpha: float) -> Similarity:
    """moeedb's fused score between two fused vectors `[hs; rw]` (as /v1/embeddings
    returns them, each half unit length): `cos_HS + alpha * cos_RW`."""

    def similarity(a: Sequence[float], b: Sequence[float]) -> float:
        return dot(a[:dim_hs], b[:dim_hs]) + alpha * dot(a[dim_hs:], b[dim_hs:])

    return similarity


def similarity_for(distance: str | None) -> Similarity:
    """The similarity of a plain collection's `distance` (higher is nearer)."""
    if distance == "Dot":
        return dot
    if distance == "Euclid":
        return lambda a, b: -math.dist(a, b)
    return cosine


def maximal_marginal_relevance(
    relevance: Sequence[float],
    vectors: Sequence[Sequence[float]],
    similarity: Similarity,
    *,
    k: int,
    lambda_mult: float = 0.5,
) -> list[int]:
    """Indexes of up to `k` candidates in MMR order.

    `relevance[i]` is candidate i's similarity to the query, `vectors[i]` its
    vector; `lambda_mult` 1 ranks by relevance alone, 0 by diversity alone.
    """
    if len(relevance) != len(vectors):
        raise ValueError("relevance and vectors must have one entry per candidate")
    if not 0.0 <= lambda_mult <= 1.0:
        raise ValueError("lambda_mult must be in [0, 1]")
    picked: list[int] = []
    left = list(range(len(vectors)))
    # The most similar picked candidate so far, per candidate left.
    closest = [-math.inf] * len(vectors)
    while left and len(picked) < k:
        def value(i: int) -> float:
            penalty = closest[i] if picked else 0.0
            return lambda_mult * relevance[i] - (1.0 - lambda_mult) * penalty

        best = max(left, key=value)
        picked.append(best)
        left.remove(best)
        for i in left:
            closest[i] = max(closest[i], similarity(vectors[i], vectors[best]))
    return picked
