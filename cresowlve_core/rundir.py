"""A run directory: the unit of resume and reporting for every stage that calls models.

It holds ``manifest.json`` (config, seeds, prompt versions, package versions, git SHA, start and
end) and one or more append-only JSONL files. Each record is written and flushed (and fsynced)
the moment its work finishes, so a killed run loses nothing that completed. Readers take the
*last* record per key, so a retried item simply supersedes its earlier error.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import threading
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterable

from cresowlve_core.paths import REPO_ROOT
from cresowlve_core.secrets import find_secret_values, redact

TRACKED_PACKAGES = ("cresowlve-core", "openai", "pydantic", "pandas", "numpy", "scipy", "altair", "xllamacpp", "torch")


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def git_sha() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=5, check=True
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=5
        )
        return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def package_versions() -> dict[str, str]:
    out = {}
    for name in TRACKED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


class RunDir:
    """Append-only JSONL files plus a manifest, safe to write from many asyncio tasks."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._secrets = find_secret_values()

    @property
    def manifest_path(self) -> Path:
        return self.path / "manifest.json"

    def read_manifest(self) -> dict[str, Any] | None:
        if not self.manifest_path.exists():
            return None
        return json.loads(self.manifest_path.read_text(encoding="utf-8"))

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        tmp = self.manifest_path.with_suffix(".tmp")
        tmp.write_text(self._safe(json.dumps(manifest, indent=2, ensure_ascii=False, default=str)), encoding="utf-8")
        os.replace(tmp, self.manifest_path)

    def append(self, filename: str, record: dict[str, Any]) -> None:
        line = self._safe(json.dumps(record, ensure_ascii=False, default=str))
        with self._lock, open(self.path / filename, "a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())

    def read(self, filename: str) -> list[dict[str, Any]]:
        """Every record in file order. A torn last line (from a kill mid-write) is skipped and
        reported as a warning; any other unparseable line is an error."""
        path = self.path / filename
        if not path.exists():
            return []
        lines = path.read_text(encoding="utf-8").splitlines()
        out = []
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as exc:
                if i == len(lines) - 1:
                    import warnings

                    warnings.warn(f"{path}: ignoring a torn last line (the run was killed mid-write)", stacklevel=2)
                    continue
                raise ValueError(f"{path}:{i + 1}: not JSON: {exc}") from exc
        return out

    def latest(self, filename: str, key: Callable[[dict[str, Any]], Any]) -> dict[Any, dict[str, Any]]:
        """The last record per key."""
        return {key(r): r for r in self.read(filename)}

    def _safe(self, text: str) -> str:
        return redact(text, self._secrets)


def base_manifest(kind: str, config: dict[str, Any], prompts: Iterable[str] = ()) -> dict[str, Any]:
    """Fields every manifest carries: provenance and timing."""
    return {
        "kind": kind,
        **config,
        "prompts": sorted(set(prompts)),
        "git_sha": git_sha(),
        "packages": package_versions(),
        "started_at": now_iso(),
        "finished_at": None,
    }


async def complete_until_stopped(
    tasks: list[asyncio.Task[Any]],
    stop_on: tuple[type[BaseException], ...],
    on_result: Callable[[Any], None] | None = None,
) -> BaseException | None:
    """Await ``tasks`` as they finish, handing each result to ``on_result`` (e.g. to append it).

    The first exception of a ``stop_on`` type (a spent budget, a bad key) cancels the rest and is
    returned, so the caller can record why the run stopped; other exceptions propagate. Whatever
    finished before is already persisted by ``on_result`` or by the task itself.
    """
    try:
        for fut in asyncio.as_completed(tasks):
            try:
                result = await fut
            except stop_on as exc:
                return exc
            if on_result is not None:
                on_result(result)
        return None
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
