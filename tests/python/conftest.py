"""Fixtures of the Python end-to-end suite: one `moeedb serve` with the
embedded default model, its Qdrant REST API and Chroma's API on ports of their
own, started once per session over a throwaway database folder and stopped at
the end. Tests reach it through the real Python clients from PyPI
(tests/python/requirements.txt, installed by scripts/python_env.sh)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("MOEEDB_BIN", ROOT / "build" / "moeedb"))
API_KEY = "py-e2e-secret"


@dataclass(frozen=True)
class Server:
    """Where the running server answers."""

    base: str      # moeedb's own API and /v1 (OpenAI)
    qdrant: str    # Qdrant's REST API at the root of its port
    chroma: str    # Chroma's /api/v2 at the root of its port
    api_key: str
    model: str     # the served model's name

    @property
    def qdrant_port(self) -> int:
        return int(self.qdrant.rsplit(":", 1)[1])

    @property
    def chroma_port(self) -> int:
        return int(self.chroma.rsplit(":", 1)[1])


def _start(db: Path) -> tuple[subprocess.Popen[str], Server]:
    proc = subprocess.Popen(
        [str(BIN), "serve", "--db", str(db), "--port", "0", "--qdrant-port", "0", "--chroma-port", "0",
         "--api-key", API_KEY, "--threads", "2"],
        stdout=subprocess.PIPE, stderr=None, text=True)
    seen: dict[str, str] = {}
    assert proc.stdout is not None
    for line in proc.stdout:
        for key, pattern in (("qdrant", r"qdrant REST API on (http://\S+)"), ("chroma", r"chroma API on (http://\S+)"),
                             ("base", r"listening on (http://\S+)")):
            m = re.search(pattern, line)
            if m:
                seen[key] = m.group(1).rstrip("/")
        if "base" in seen:
            break
    if "base" not in seen:
        proc.kill()
        raise RuntimeError(f"moeedb serve did not start (exit {proc.wait()})")
    # Drain the rest of stdout so the server never blocks on a full pipe.
    threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()  # type: ignore[union-attr]
    import json
    import urllib.request
    req = urllib.request.Request(seen["base"] + "/v1/models", headers={"Authorization": f"Bearer {API_KEY}"})
    with urllib.request.urlopen(req) as r:
        model = json.load(r)["data"][0]["id"]
    return proc, Server(seen["base"], seen["qdrant"], seen["chroma"], API_KEY, model)


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    if not BIN.exists():
        pytest.fail(f"{BIN} is not built: run scripts/setup.sh first")
    folder = Path(tempfile.mkdtemp(prefix="moeedb-py-e2e-"))
    proc, srv = _start(folder / "db")
    try:
        yield srv
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def collection_name() -> str:
    """A fresh collection name per test, so tests never see each other's points."""
    return "py_" + uuid.uuid4().hex[:12]


# Sentences and their paraphrases: each query's own document must rank first.
DOCS = [
    ("animal1", "A dog is running through a field of grass.", {"topic": "animals", "year": 2021}),
    ("bank1", "My card was charged twice for the same purchase.", {"topic": "banking", "year": 2022}),
    ("travel1", "The plane took off from the airport on time.", {"topic": "travel", "year": 2023}),
    ("tech7", "The app keeps crashing every time I open it.", {"topic": "tech", "year": 2024}),
    ("music1", "A man is playing the guitar on the street.", {"topic": "music", "year": 2021}),
    ("bank4", "My new debit card has still not arrived in the mail.", {"topic": "banking", "year": 2023}),
]
PARAPHRASES = [
    ("I was billed two times for one payment.", "bank1"),
    ("An airplane is departing from the runway.", "travel1"),
    ("The application shuts down whenever I launch it.", "tech7"),
    ("Someone strums a guitar outdoors.", "music1"),
]
