"""LangChain integration: `MoeedbEmbeddings` and `MoeedbVectorStore`.

Needs `langchain-core` (`pip install "moeedb[langchain]"`).
"""

try:
    import langchain_core  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError('moeedb.langchain needs langchain-core: pip install "moeedb[langchain]"') from e

from moeedb.langchain.embeddings import MoeedbEmbeddings
from moeedb.langchain.vectorstores import SCORE_PARTS_KEY, MoeedbVectorStore

__all__ = ["MoeedbEmbeddings", "MoeedbVectorStore", "SCORE_PARTS_KEY"]
