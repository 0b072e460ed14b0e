"""Documents as the collections API stores them, and the answers of writes.

A document is an id (a non-empty string), a text (embedded by the server and fed
to the lexical index), a metadata object (what filters see) and, in collections
that hold the client's own vectors, a vector.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Union

__all__ = ["Vector", "Document", "DocumentLike", "DocumentPage", "UpsertResult", "DeleteResult", "to_document"]

# A client's vector: numbers (a plain collection's vector, or the served model's
# fused vector as /v1/embeddings returns it), or the raw halves {"hs": [...], "rw": [...]}.
Vector = Union[Sequence[float], Mapping[str, Sequence[float]]]


@dataclass
class Document:
    """One document: `id`, `text`, `metadata` and, for client vectors, `vector`.

    Read back from the server (`get`, `list_documents`) a document has its text
    and metadata; the server does not return vectors, so `vector` is then None.
    """

    id: str
    text: str | None = None
    metadata: dict[str, Any] | None = None
    vector: Vector | None = None

    def to_json(self) -> dict[str, Any]:
        """The document as the upsert route takes it (absent fields left out)."""
        if not isinstance(self.id, str) or not self.id:
            raise ValueError(f"a document id must be a non-empty string, got {self.id!r}")
        out: dict[str, Any] = {"id": self.id}
        if self.text is not None:
            out["text"] = self.text
        if self.metadata is not None:
            out["metadata"] = dict(self.metadata)
        if self.vector is not None:
            out["vector"] = vector_to_json(self.vector)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Document:
        """A document from the server's `{"id", "text", "metadata"}`."""
        metadata = data.get("metadata")
        return cls(
            id=str(data["id"]),
            text=data.get("text"),
            metadata=dict(metadata) if isinstance(metadata, Mapping) else {},
        )


# What upsert takes: Documents or dicts of the same fields.
DocumentLike = Union[Document, Mapping[str, Any]]


def to_document(doc: DocumentLike) -> Document:
    """A `Document` from a `Document` or a dict with `id`, `text`, `metadata`, `vector`.

    Unknown keys in a dict are a ValueError (a typo would otherwise be dropped).
    """
    if isinstance(doc, Document):
        return doc
    if not isinstance(doc, Mapping):
        raise TypeError(f"a document must be a moeedb.Document or a dict, got {type(doc).__name__}")
    unknown = set(doc) - {"id", "text", "metadata", "vector"}
    if unknown:
        raise ValueError(f"unknown document field(s) {sorted(unknown)} (id, text, metadata, vector)")
    if "id" not in doc:
        raise ValueError("a document needs an 'id'")
    return Document(id=doc["id"], text=doc.get("text"), metadata=doc.get("metadata"), vector=doc.get("vector"))


def vector_to_json(vector: Vector) -> list[float] | dict[str, list[float]]:
    """A vector as JSON: a list of floats, or `{"hs": [...], "rw": [...]}`."""
    if isinstance(vector, Mapping):
        return {str(k): [float(x) for x in v] for k, v in vector.items()}
    return [float(x) for x in vector]


@dataclass
class DocumentPage:
    """One page of `list_documents`: documents in byte order of their ids.

    `next_after` is the id to pass as `after` for the next page (None at the
    end); `total` counts the collection's documents.
    """

    documents: list[Document]
    next_after: str | None
    total: int


@dataclass
class UpsertResult:
    """What an upsert stored: `upserted` documents, of which `replaced` had existed.

    `durable` says the write was synced before the answer (`wait=True`). `seq`
    is the change-log number of the (last) write: pass it as a search's `min_seq`
    to read your own writes on any node.
    """

    upserted: int
    replaced: int
    durable: bool
    seq: int
    batches: int = 1


@dataclass
class DeleteResult:
    """What a `delete` removed: `deleted` documents; `missing` counts the ids given
    that did not exist (0 for a delete by filter).

    The server answers counts, not which ids it found: `ids` are the ids given,
    each once, in order (empty for a delete by filter). Ids go 1000 per request,
    each request its own atomic write (`batches` of them). `durable` says the
    writes were synced before their answers (`wait=True`). `seq` is the
    change-log number of the last removal (None when nothing was removed): a
    search with `min_seq=seq` no longer sees them.
    """

    deleted: int = 0
    missing: int = 0
    durable: bool = True
    seq: int | None = None
    batches: int = 0
    ids: list[str] = field(default_factory=list)
