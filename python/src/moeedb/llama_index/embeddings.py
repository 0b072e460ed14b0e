"""`MoeedbEmbedding`: LlamaIndex embeddings computed by a moeedb server."""

from __future__ import annotations

from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import Field, PrivateAttr

from moeedb import _env
from moeedb._integration import clients
from moeedb.async_client import AsyncClient
from moeedb.client import Client

__all__ = ["MoeedbEmbedding"]


class MoeedbEmbedding(BaseEmbedding):
    """LlamaIndex `BaseEmbedding` over moeedb's OpenAI route `/v1/embeddings`.

    `model_name` `default` is the fused vector `[hs; rw]` that moeedb's model
    collections search with, so nodes embedded here score in a `MoeedbVectorStore`
    exactly as the server's own text search. `url` and `api_key` default to
    `$MOEEDB_URL` and `$MOEEDB_API_KEY`; the key is never serialised.
    """

    url: str = Field(description="The moeedb server's root URL.")
    timeout: float | None = Field(default=60.0, description="Seconds per request.")
    max_retries: int = Field(default=3, description="Retries of 429 and 503 answers.")

    _client: Client = PrivateAttr()
    _aclient: AsyncClient = PrivateAttr()

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        model_name: str = "default",
        embed_batch_size: int = 256,
        timeout: float | None = 60.0,
        max_retries: int = 3,
        **kwargs: Any,
    ) -> None:
        fields: dict[str, Any] = {"url": _env.server_url(url), "model_name": model_name,
                                  "embed_batch_size": embed_batch_size, "timeout": timeout,
                                  "max_retries": max_retries, **kwargs}
        super().__init__(**fields)  # pydantic fields of this class (mypy sees only the base's)
        self._client, self._aclient = clients(self.url, api_key, timeout, max_retries)

    @classmethod
    def class_name(cls) -> str:
        """LlamaIndex's name of this component."""
        return "MoeedbEmbedding"

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._client.embed([query], model=self.model_name)[0]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return (await self._aclient.embed([query], model=self.model_name))[0]

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._client.embed([text], model=self.model_name)[0]

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return (await self._aclient.embed([text], model=self.model_name))[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._client.embed(texts, model=self.model_name) if texts else []

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return await self._aclient.embed(texts, model=self.model_name) if texts else []
