"""Shared test setup: ``tests/`` on sys.path (for ``fakeserver``), and an isolated cache/data dir."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))


@pytest.fixture
def tmp_cache(tmp_path, monkeypatch):
    """Point the response/embedding cache at a fresh directory for one test."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(cache))
    return cache
