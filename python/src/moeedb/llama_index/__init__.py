"""LlamaIndex integration: `MoeedbEmbedding` and `MoeedbVectorStore`.

Needs `llama-index-core` (`pip install "moeedb[llama-index]"`).
"""

try:
    import llama_index.core  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError('moeedb.llama_index needs llama-index-core: pip install "moeedb[llama-index]"') from e

from moeedb.llama_index.embeddings import MoeedbEmbedding
from moeedb.llama_index.filters import to_moeedb_filter
from moeedb.llama_index.vector_store import MoeedbVectorStore, hybrid_weights

__all__ = ["MoeedbEmbedding", "MoeedbVectorStore", "to_moeedb_filter", "hybrid_weights"]
