"""pytest plugin for running qdrant-client's congruence suite against moeedb.

moeedb serves Qdrant's REST API only (no gRPC on 6334), while the suite asks
for gRPC clients (``prefer_grpc=True``) in many tests to compare them with the
REST ones. This plugin makes every ``QdrantClient`` it builds speak REST, so
those comparisons become REST against REST and the tests exercise what moeedb
serves. Loaded with ``-p no_grpc`` (its folder on ``PYTHONPATH``).
"""

from __future__ import annotations

import functools

import qdrant_client


def _rest_only(init):
    @functools.wraps(init)
    def wrapped(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        kwargs["prefer_grpc"] = False
        return init(self, *args, **kwargs)

    return wrapped


qdrant_client.QdrantClient.__init__ = _rest_only(qdrant_client.QdrantClient.__init__)
