"""Where the project keeps things. Everything is relative to the repository root."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent
DATA_DIR = Path(os.environ.get("CRESOWLVE_DATA_DIR", REPO_ROOT / "data"))
REPORTS_DIR = Path(os.environ.get("CRESOWLVE_REPORTS_DIR", REPO_ROOT / "reports"))
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
RUNS_DIR = DATA_DIR / "runs"
CACHE_DIR = Path(os.environ.get("CRESOWLVE_CACHE_DIR", DATA_DIR / "cache"))
