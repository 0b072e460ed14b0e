"""Relevance in [0, 1] from a moeedb hit, for frameworks that expect one.

How each score is mapped (0 dissimilar, 1 identical or best possible):

- fused search of a model collection: `score = cos_HS + alpha * cos_RW` lies in
  `[-(1+|alpha|), 1+|alpha|]`; relevance is `(1 + score / (1+|alpha|)) / 2`;
- a cosine (hs or rw mode, a plain Cosine collection) or a dot product (a plain
  Dot collection, exact for unit vectors): `(1 + score) / 2`, clipped;
- a plain Euclid collection: `1 / (1 + distance)`;
- lexical (BM25, unbounded): `score / (1 + score)`;
- hybrid: the score over its largest possible value (every signal ranked first
  under rrf, `(w_hs + |alpha| + beta) / (rrf_k + 1)`; every normalised signal 1
  under weighted fusion, `w_hs + |alpha| + beta`), clipped.
"""

from __future__ import annotations

from dataclasses import dataclass

from moeedb.search import Hit

__all__ = ["ScoreScale", "relevance"]

# The server's hybrid defaults (docs/server.md): w_hs 1, beta 16, rrf with k 60.
DEFAULT_W_HS = 1.0
DEFAULT_BETA = 16.0
DEFAULT_RRF_K = 60.0
DEFAULT_FUSION = "rrf"


def _clip(x: float) -> float:
    return 0.0 if x != x else min(1.0, max(0.0, x))


@dataclass(frozen=True)
class ScoreScale:
    """What a search's scores mean: the collection (`plain` or not, its `distance`)
    and the query's `mode`, `alpha` and hybrid weights (None: server defaults)."""

    plain: bool = False
    distance: str | None = None
    mode: str | None = None
    alpha: float = 1.0
    w_hs: float | None = None
    beta: float | None = None
    fusion: str | None = None
    rrf_k: float | None = None

    def relevance(self, hit: Hit) -> float:
        """The hit's relevance in [0, 1] under this scale (see the module's notes)."""
        return relevance(hit, self)


def relevance(hit: Hit, scale: ScoreScale) -> float:
    """`hit`'s relevance in [0, 1]: see the module docstring for each case."""
    mode = scale.mode or "fused"
    s = hit.score
    if mode == "lexical":
        return _clip(s / (1.0 + s)) if s > 0 else 0.0
    if mode == "hybrid":
        rw_weight = 0.0 if scale.plain else abs(scale.alpha)
        w_hs = scale.w_hs if scale.w_hs is not None else DEFAULT_W_HS
        beta = scale.beta if scale.beta is not None else DEFAULT_BETA
        total = abs(w_hs) + rw_weight + abs(beta)
        if (scale.fusion or DEFAULT_FUSION) == "rrf":
            total /= (scale.rrf_k if scale.rrf_k is not None else DEFAULT_RRF_K) + 1.0
        return _clip(s / total) if total > 0 else 0.0
    if scale.plain:
        if scale.distance == "Euclid" and hit.distance is not None:
            return 1.0 / (1.0 + hit.distance)
        return _clip((1.0 + s) / 2.0)
    if mode in ("hs", "rw"):
        return _clip((1.0 + s) / 2.0)
    return _clip((1.0 + s / (1.0 + abs(scale.alpha))) / 2.0)
