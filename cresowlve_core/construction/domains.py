"""Knowledge-domain consolidation (paper §3.2): free-text domains -> the paper's 34 groups.

Route 1 is the editable mapping file (``data/construction/domain_mapping.json``: group -> list of
free-text domains; matching is on :func:`~cresowlve_core.construction.parsers.normalise_label`).
Route 2, for anything the file does not list, is the nearest neighbour on the bundled MiniLM
embeddings among the group names and every mapped domain, if its cosine similarity reaches
``min_similarity``. Anything else stays ``unmapped`` (kept in ``domains_free``, counted).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cresowlve_core import jsonl
from cresowlve_core.construction.parsers import normalise_label
from cresowlve_core.construction.records import Candidate, StepOutput
from cresowlve_core.construction.vocab import DOMAIN_GROUPS
from cresowlve_core.failures import InputError
from cresowlve_core.paths import shipped_data

DEFAULT_MIN_SIMILARITY = 0.5


def load_mapping(path: str | Path | None = None) -> dict[str, str]:
    """Normalised free-text domain -> group. Each group name maps to itself. A file that is not
    JSON, a group that is not one of the 34, or a group whose domains are not a list of strings
    is an :class:`InputError` naming the file and the group."""
    path = Path(path or shipped_data("construction", "domain_mapping.json"))
    try:
        data = json.loads(jsonl.read_text(path, error=InputError))  # UTF-8, a byte-order mark accepted
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: {jsonl.not_json(exc)}") from None
    groups = data.get("groups") if isinstance(data, dict) else None
    if not isinstance(groups, dict):
        raise InputError(f"{path}: expected {{'groups': {{group: [domain, ...]}}}}")
    unknown = sorted(set(groups) - set(DOMAIN_GROUPS))
    if unknown:
        raise InputError(f"{path}: unknown group(s) {unknown}; groups must be among the paper's 34")
    for group, domains in groups.items():
        if not isinstance(domains, list) or not all(isinstance(d, str) for d in domains):
            raise InputError(f"{path}: group {group!r} must be a list of domain strings, "
                             f"got {json.dumps(domains, ensure_ascii=False)[:80]}")
    mapping = {normalise_label(g): g for g in DOMAIN_GROUPS}
    for group, domains in groups.items():
        for d in domains:
            mapping.setdefault(normalise_label(d), group)
    return mapping


def _embedding_cache() -> Path | None:
    """The embedding cache under ``CRESOWLVE_CACHE_DIR`` as set *now* (None: the default)."""
    root = os.environ.get("CRESOWLVE_CACHE_DIR")
    return Path(root) / "embeddings" / "minilm.sqlite" if root else None


def route_domains(free: Sequence[str], mapping: dict[str, str], *, fallback: bool = True,
                  min_similarity: float = DEFAULT_MIN_SIMILARITY) -> dict[str, dict[str, Any]]:
    """``free text -> {"group": str | None, "route": "mapping"|"embedding"|"unmapped", "similarity"}``."""
    out: dict[str, dict[str, Any]] = {}
    todo = []
    for d in dict.fromkeys(free):
        g = mapping.get(normalise_label(d))
        if g:
            out[d] = {"group": g, "route": "mapping", "similarity": None}
        else:
            todo.append(d)
    if todo and fallback:
        from cresowlve_core.embeddings import embed

        keys = list(mapping)
        cache = _embedding_cache()
        ref = embed(keys, cache_path=cache)
        sims = embed(todo, cache_path=cache) @ ref.T
        for d, row in zip(todo, sims):
            j = int(row.argmax())
            ok = float(row[j]) >= min_similarity
            out[d] = {"group": mapping[keys[j]] if ok else None, "route": "embedding" if ok else "unmapped",
                      "similarity": round(float(row[j]), 4), "nearest": keys[j]}
    for d in todo:
        out.setdefault(d, {"group": None, "route": "unmapped", "similarity": None})
    return out


def consolidate_domains(cands: list[Candidate], mapping_path: str | Path | None = None, *, fallback: bool = True,
                        min_similarity: float = DEFAULT_MIN_SIMILARITY) -> tuple[StepOutput, dict[str, Any]]:
    """Set each candidate's ``domains`` (groups, in order, no repeats) from ``domains_free``.
    Returns the step output (counts per route) and the routing table of every free-text value."""
    mapping = load_mapping(mapping_path)
    routes = route_domains([d for c in cands for d in c.domains_free], mapping, fallback=fallback,
                           min_similarity=min_similarity)
    out = []
    n_unmapped_items = 0
    for c in cands:
        groups = list(dict.fromkeys(routes[d]["group"] for d in c.domains_free if routes[d]["group"]))
        # a domain no group was found for: the item's groups are not all known (its `domains` alone would
        # read as "no other group applies"), so it is recorded and flagged for review
        unmapped = [d for d in c.domains_free if routes[d]["group"] is None]
        n_unmapped_items += bool(unmapped)
        out.append(c.with_verdict("consolidate_domains", {"groups": groups, "unmapped": unmapped},
                                  review_flags=["unmapped"] if unmapped else [], domains=groups))
    per_value = Counter(r["route"] for r in routes.values())
    per_mention = Counter(routes[d]["route"] for c in cands for d in c.domains_free)
    counts = {"n_free_values": len(routes), "routes_by_value": dict(per_value), "n_items_unmapped": n_unmapped_items,
              "routes_by_mention": dict(per_mention), "mapping_file": str(mapping_path or shipped_data("construction", "domain_mapping.json")),
              "min_similarity": min_similarity}
    return StepOutput("consolidate_domains", out, [], counts), routes
