"""Where the integrations find the server when they are not told: the environment."""

from __future__ import annotations

import os

from moeedb._http import DEFAULT_URL

URL_ENV = "MOEEDB_URL"
API_KEY_ENV = "MOEEDB_API_KEY"


def server_url(url: str | None) -> str:
    """`url`, else `$MOEEDB_URL`, else http://127.0.0.1:8080."""
    return url or os.environ.get(URL_ENV) or DEFAULT_URL


def api_key(key: str | None) -> str | None:
    """`key`, else `$MOEEDB_API_KEY`, else None (no key)."""
    return key if key is not None else os.environ.get(API_KEY_ENV) or None
