"""The knowledge graph queries are built from: a Wikidata subset (LiterallyWikidata), in memory.

``data/kg/literally_wikidata`` holds ``QID<TAB>PID<TAB>QID`` triples (the LitWD1K, LitWD19K and
LitWD48K splits, about 91k distinct triples), English labels and descriptions of entities, and
relation labels. There are no sitelink counts, so *notability* is approximated by an entity's
degree (in + out edges) in this graph.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from cresowlve_core.paths import DATA_DIR

KG_DIR = DATA_DIR / "kg" / "literally_wikidata"
TRIPLE_FILES = (
    "LitWD1K/train.txt",
    "LitWD1K/valid.txt",
    "LitWD1K/test.txt",
    "LitWD19K/valid.txt",
    "LitWD19K/test.txt",
    "LitWD48K/valid.txt",
    "LitWD48K/test.txt",
)

KGTriple = tuple[str, str, str]


def _read_table(path: Path) -> dict[str, str]:
    table: dict[str, str] = {}
    if not path.exists():
        return table
    with path.open(encoding="utf-8") as f:
        for line in f:
            key, _, value = line.rstrip("\n").partition("\t")
            if key and value and key not in table:
                table[key] = value
    return table


@dataclass
class KnowledgeGraph:
    """Triples plus labels, with the indexes query construction needs."""

    triples: list[KGTriple]
    labels: dict[str, str] = field(default_factory=dict)
    descriptions: dict[str, str] = field(default_factory=dict)
    relation_labels: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.triples = sorted(set(self.triples))
        self._set = set(self.triples)
        self.out_edges: dict[str, list[tuple[str, str]]] = defaultdict(list)
        self.by_relation: dict[str, list[tuple[str, str]]] = defaultdict(list)
        self.degree: Counter[str] = Counter()
        for s, p, o in self.triples:
            self.out_edges[s].append((p, o))
            self.by_relation[p].append((s, o))
            self.degree[s] += 1
            self.degree[o] += 1

    def has(self, s: str, p: str, o: str) -> bool:
        return (s, p, o) in self._set

    def label(self, qid: str) -> str:
        """English label of an entity or relation; the id itself when there is none."""
        return self.labels.get(qid) or self.relation_labels.get(qid) or qid

    def has_label(self, qid: str) -> bool:
        return qid in self.labels or qid in self.relation_labels


def load_kg(root: Path | str = KG_DIR) -> KnowledgeGraph:
    """Read the shipped Wikidata subset (cached per directory)."""
    return _load_kg(str(Path(root).resolve()))


@lru_cache(maxsize=4)
def _load_kg(root: str) -> KnowledgeGraph:
    base = Path(root)
    triples: list[KGTriple] = []
    for name in TRIPLE_FILES:
        path = base / name
        if not path.exists():
            continue
        with path.open(encoding="utf-8") as f:
            for line in f:
                parts = line.split()
                if len(parts) == 3:
                    triples.append((parts[0], parts[1], parts[2]))
    if not triples:
        raise FileNotFoundError(f"no triples under {base} (expected {', '.join(TRIPLE_FILES)})")
    return KnowledgeGraph(
        triples,
        labels=_read_table(base / "Entities" / "entity_labels_en.txt"),
        descriptions=_read_table(base / "Entities" / "entity_wikidata_descriptions_en.txt"),
        relation_labels=_read_table(base / "Relations" / "relation_labels_en.txt"),
    )
