"""Collections: what `list_collections` and `get_collection` describe.

A collection either embeds its documents with the served model (no
`vector_size`: search by text, fused HS + RW scores, a lexical index) or holds
the client's own vectors (`vector_size` N, `distance` Cosine, Dot or Euclid).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Distance", "CollectionSummary", "CollectionInfo"]

Distance = Literal["Cosine", "Dot", "Euclid"]


@dataclass(frozen=True)
class CollectionSummary:
    """A collection as `list_collections` names it: `name` and its `documents` count."""

    name: str
    documents: int


@dataclass
class CollectionInfo:
    """A collection as `get_collection` describes it.

    `spec` is the recorded setup as the server reports it (index, alpha, lexical,
    model info); the properties read the parts a client needs. `last_op` is the
    change log's head; `node` is this node's view (`applied_seq`, `indexed`).
    """

    name: str
    documents: int
    last_op: int = 0
    spec: dict[str, Any] = field(default_factory=dict)
    node: dict[str, Any] | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CollectionInfo:
        """A description from the server's JSON."""
        spec = data.get("spec")
        node = data.get("node")
        return cls(
            name=str(data["name"]),
            documents=int(data.get("documents", 0)),
            last_op=int(data.get("last_op", 0)),
            spec=dict(spec) if isinstance(spec, Mapping) else {},
            node=dict(node) if isinstance(node, Mapping) else None,
        )

    @property
    def _vectors(self) -> Mapping[str, Any]:
        info = self.spec.get("info")
        vectors = info.get("vectors") if isinstance(info, Mapping) else None
        return vectors if isinstance(vectors, Mapping) else {}

    @property
    def kind(self) -> str:
        """`model` (embedded by the server), `fused` or `plain` (the client's vectors)."""
        return str(self._vectors.get("kind", "model"))

    @property
    def vector_size(self) -> int | None:
        """The client vectors' size of a plain collection, else None."""
        size = self._vectors.get("size")
        return int(size) if size is not None else None

    @property
    def distance(self) -> str | None:
        """The distance of a plain collection (`Cosine`, `Dot`, `Euclid`), else None."""
        distance = self._vectors.get("distance")
        return str(distance) if distance is not None else None

    @property
    def alpha(self) -> float:
        """The RW weight of fused search (`score = score_hs + alpha * score_rw`)."""
        return float(self.spec.get("alpha", 1.0))

    @property
    def dim_hs(self) -> int:
        """The size of the HS vectors (a plain collection's own size)."""
        return int(self.spec.get("dim_hs", 0))

    @property
    def dim_rw(self) -> int:
        """The size of the RW vectors."""
        return int(self.spec.get("dim_rw", 0))

    @property
    def lexical(self) -> bool:
        """Whether the collection has a lexical (BM25) index: lexical and hybrid search."""
        lexical = self.spec.get("lexical")
        return bool(lexical.get("enabled", False)) if isinstance(lexical, Mapping) else bool(lexical)
