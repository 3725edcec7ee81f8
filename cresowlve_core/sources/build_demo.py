"""Rebuild ``data/cresowlve/demo_items.jsonl`` from ``data/cresowlve/paper_examples.jsonl``.

Usage: ``python -m cresowlve_core.sources.build_demo``.
"""

from __future__ import annotations

from cresowlve_core.sources.sample import build_demo_items, write_demo_items


def main() -> None:
    """Build the demo items and write them next to their source."""
    items = build_demo_items()
    path = write_demo_items(items)
    n_bench = sum(1 for it in items if it.meta["in_benchmark"])
    print(f"wrote {len(items)} items ({n_bench} in the benchmark) to {path}")


if __name__ == "__main__":
    main()
