"""moeedb: the Python client of the moeedb vector database and embedding server.

`Client` and `AsyncClient` wrap the collections API (create, upsert, search with
every signal's score, list, delete) and `/v1/embeddings`; `moeedb.langchain` and
`moeedb.llama_index` plug moeedb into those frameworks (extras of the same names).
"""

from moeedb._version import __version__
from moeedb.async_client import AsyncClient
from moeedb.client import Client
from moeedb.collection import CollectionInfo, CollectionSummary, Distance
from moeedb.document import DeleteResult, Document, DocumentPage, UpsertResult, Vector
from moeedb import errors as _errors
from moeedb.errors import *  # noqa: F403  (every error class, listed once in errors.__all__)
from moeedb.retry import RetryPolicy
from moeedb.search import Fusion, Hit, Norm, ScoreParts, SearchMode, SearchResult, Using

__all__ = [
    "__version__",
    "Client",
    "AsyncClient",
    "CollectionInfo",
    "CollectionSummary",
    "Distance",
    "Document",
    "DocumentPage",
    "UpsertResult",
    "DeleteResult",
    "Vector",
    "SearchResult",
    "Hit",
    "ScoreParts",
    "SearchMode",
    "Fusion",
    "Norm",
    "Using",
    "RetryPolicy",
]
__all__ += _errors.__all__
