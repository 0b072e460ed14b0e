"""`MoeedbEmbeddings`: LangChain embeddings computed by a moeedb server."""

from __future__ import annotations

from langchain_core.embeddings import Embeddings

from moeedb import _env
from moeedb._integration import clients
from moeedb.async_client import AsyncClient
from moeedb.client import Client

__all__ = ["MoeedbEmbeddings"]


class MoeedbEmbeddings(Embeddings):
    """LangChain `Embeddings` over moeedb's OpenAI route `/v1/embeddings`.

    `model` `default` is the fused vector `[hs; rw]` (each half unit length) that
    moeedb's collections search with: a `MoeedbVectorStore` given these embeddings
    lets the server embed instead. `url` and `api_key` default to `$MOEEDB_URL`
    and `$MOEEDB_API_KEY`.
    """

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        model: str = "default",
        timeout: float | None = 60.0,
        max_retries: int = 3,
        batch_size: int = 1000,
        client: Client | None = None,
        async_client: AsyncClient | None = None,
    ) -> None:
        self.url = _env.server_url(url)
        self.model = model
        self.batch_size = batch_size
        self._client, self._async_client = clients(self.url, api_key, timeout, max_retries, client, async_client)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """The vectors of `texts`, in order (one request per `batch_size` texts)."""
        if not texts:
            return []
        return self._client.embed(texts, model=self.model, batch_size=self.batch_size)

    def embed_query(self, text: str) -> list[float]:
        """The vector of one query text (the same model as documents: no query prompt)."""
        return self._client.embed([text], model=self.model)[0]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        """The vectors of `texts`, in order, without blocking the event loop."""
        if not texts:
            return []
        return await self._async_client.embed(texts, model=self.model, batch_size=self.batch_size)

    async def aembed_query(self, text: str) -> list[float]:
        """The vector of one query text, without blocking the event loop."""
        return (await self._async_client.embed([text], model=self.model))[0]

    def __repr__(self) -> str:
        return f"MoeedbEmbeddings(url={self.url!r}, model={self.model!r})"
