"""The Wikidata subset (LiterallyWikidata) in memory, shared by CREATE and the synthetic pipeline.

``data/kg/literally_wikidata`` holds ``QID<TAB>PID<TAB>QID`` triples (the LitWD1K, LitWD19K and
LitWD48K splits, about 86k distinct triples over about 42k entities), English labels and
descriptions of entities, relation labels, and, filtered to the entities of those triples,
entity types (``instance of``, ``QID<TAB>type QID``) and English aliases (``QID<TAB>a, b, c``).
There are no sitelink counts, so *notability* is approximated by an entity's degree (in + out
edges) or in-degree in this graph (see :mod:`cresowlve_core.synthetic.notability`).

:class:`KnowledgeSource` is the small interface the synthetic pipeline needs; the in-memory
:class:`KnowledgeGraph` satisfies it, and :class:`cresowlve_core.sources.sparql.WikidataSparql`
implements it against the online Wikidata endpoint.

"Subject ``s`` has fact ``(p, o)``" means the triple ``s p o`` is in the loaded graph.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Protocol, runtime_checkable

from cresowlve_core.failures import InputError, MissingInput
from cresowlve_core.inputs import control_problem, text_problem
from cresowlve_core.paths import shipped_data

#: ``(relation, object)`` facts of these relations are *peripheral*: they describe an anchor
#: without naming it (awards, schooling, memberships, works, collaborators, places).
PERIPHERAL_RELATIONS: tuple[str, ...] = (
    "P166",  # award received
    "P1411",  # nominated for
    "P69",  # educated at
    "P463",  # member of
    "P108",  # employer
    "P800",  # notable work
    "P737",  # influenced by
    "P1066",  # student of
    "P184",  # doctoral advisor
    "P19",  # place of birth
    "P20",  # place of death
    "P119",  # place of burial
    "P551",  # residence
    "P937",  # work location
    "P102",  # member of political party
    "P135",  # movement
    "P264",  # record label
    "P6379",  # has works in the collection
    "P161",  # cast member
    "P57",  # director
    "P58",  # screenwriter
    "P86",  # composer
    "P162",  # producer
    "P344",  # director of photography
    "P1040",  # film editor
    "P272",  # production company
    "P840",  # narrative location
    "P915",  # filming location
    "P144",  # based on
    "P50",  # author
    "P138",  # named after
    "P190",  # twinned administrative body
    "P47",  # shares border with
    "P206",  # located in or next to body of water
    "P112",  # founded by
)


def kg_dir() -> Path:
    """The shipped Wikidata subset, resolved when called: the user data dir's copy if there is one,
    else the project's or the package's (``CRESOWLVE_DATA_DIR`` elsewhere still finds it)."""
    return shipped_data("kg", "literally_wikidata")
TRIPLE_FILES = (
    "LitWD1K/train.txt",
    "LitWD1K/valid.txt",
    "LitWD1K/test.txt",
    "LitWD19K/valid.txt",
    "LitWD19K/test.txt",
    "LitWD48K/valid.txt",
    "LitWD48K/test.txt",
)
#: The aliases file joins a QID's aliases with this separator (an alias that itself contains
#: ", " therefore comes back in pieces: the file format is lossy there).
ALIAS_SEPARATOR = ", "

#: the ids a triple line holds: an item, a property, an item (a literal object is no entity of this graph)
_ITEM_ID = re.compile(r"Q[1-9][0-9]*")
_PROPERTY_ID = re.compile(r"P[1-9][0-9]*")

KGTriple = tuple[str, str, str]
Fact = tuple[str, str]  # (relation PID, object QID)


@runtime_checkable
class KnowledgeSource(Protocol):
    """What the synthetic pipeline asks of a knowledge source (in memory or online).

    ``notability`` is the source's notability proxy (graph degree here, sitelinks online).
    """

    name: str
    notability_measure: str

    def english_label(self, qid: str) -> str | None:
        """The English label, or ``None`` when the entity has none."""
        ...

    def aliases_of(self, qid: str) -> list[str]:
        """English aliases (may be empty)."""
        ...

    def description_of(self, qid: str) -> str | None:
        """The English description, or ``None``."""
        ...

    def types_of(self, qid: str) -> frozenset[str]:
        """The entity's ``instance of`` classes."""
        ...

    def facts_of(self, qid: str) -> list[Fact]:
        """Every ``(relation, object)`` with ``qid`` as subject, sorted."""
        ...

    def subjects_with(self, relation: str, obj: str) -> list[str]:
        """Sorted subjects ``s`` with ``s relation obj``."""
        ...

    def n_subjects_with(self, relation: str, obj: str) -> int:
        """How many subjects ``s`` have ``s relation obj``."""
        ...

    def subjects_with_all(self, facts: Sequence[Fact]) -> list[str]:
        """Sorted subjects having every one of ``facts``."""
        ...

    def entities_of_types(self, types: Iterable[str]) -> list[str]:
        """Sorted entities that are an instance of any of ``types``."""
        ...

    def notability(self, qid: str) -> int:
        """The notability proxy of ``qid``."""
        ...


class KnowledgeGraphError(InputError):
    """A knowledge-graph file breaks its format or the input limits (:mod:`cresowlve_core.inputs`);
    the message names the file and line (exit 2, before anything is sent)."""


def _lines(path: Path, max_chars: int | None = None) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of every non-blank line of a graph file (``.gz`` read through gzip).

    The file is UTF-8 (a byte-order mark is dropped, never read as part of the first QID). A ``.gz``
    file that is truncated or not gzip, bytes
    that are not UTF-8, a control character other than tab and newline anywhere, or a line above the
    input size limit (``max_chars``, None: 64 KB), are refused with :class:`KnowledgeGraphError`
    naming ``file:line``."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            data = f.read()
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:  # a truncated or corrupt download of a .gz table
        raise KnowledgeGraphError(f"{path}: not a readable gzip file ({exc}); copy or download it again") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        bad_line = data.count(b"\n", 0, exc.start) + 1
        raise KnowledgeGraphError(f"{path}:{bad_line}: not UTF-8 (byte 0x{data[exc.start]:02x}); save the file as UTF-8") from None
    if (bad := control_problem(text)) is not None:
        raise KnowledgeGraphError(f"{path}:{bad[0]}: {bad[1]}")
    for lineno, line in enumerate(text.split("\n"), 1):
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        if (problem := text_problem(line, "line", max_chars=max_chars)) is not None:
            raise KnowledgeGraphError(f"{path}:{lineno}: {problem}")
        yield lineno, line


def _key_value(path: Path, lineno: int, line: str) -> tuple[str, str]:
    key, _, value = line.partition("\t")
    if not key.strip() or not value.strip():
        raise KnowledgeGraphError(f"{path}:{lineno}: expected KEY<TAB>VALUE with both non-empty, got {line[:80]!r}")
    if not (_ITEM_ID.fullmatch(key) or _PROPERTY_ID.fullmatch(key)):  # e.g. '\ufeffQ1': a label Q1 would not have
        raise KnowledgeGraphError(f"{path}:{lineno}: expected a QID or PID before the tab, got {key[:40]!r}")
    return key, value


def _existing(path: Path) -> Path | None:
    """``path`` or ``path.gz``, whichever exists."""
    if path.exists():
        return path
    gz = path.with_name(path.name + ".gz")
    return gz if gz.exists() else None


def _read_table(path: Path, max_chars: int | None = None) -> dict[str, str]:
    """``KEY<TAB>VALUE`` lines (the first value of a key is kept)."""
    table: dict[str, str] = {}
    found = _existing(path)
    if found is None:
        return table
    for lineno, line in _lines(found, max_chars):
        key, value = _key_value(found, lineno, line)
        table.setdefault(key, value)
    return table


def _read_multi(path: Path, max_chars: int | None = None) -> dict[str, frozenset[str]]:
    """``QID<TAB>value`` lines, several per QID."""
    out: dict[str, set[str]] = defaultdict(set)
    found = _existing(path)
    if found is None:
        return {}
    for lineno, line in _lines(found, max_chars):
        key, value = _key_value(found, lineno, line)
        out[key].add(value.strip())
    return {k: frozenset(v) for k, v in out.items()}


def split_aliases(text: str) -> list[str]:
    """The aliases of one line of ``entity_aliases_en.txt``, de-duplicated, in file order."""
    return list(dict.fromkeys(a.strip() for a in text.split(ALIAS_SEPARATOR) if a.strip()))


@dataclass
class KnowledgeGraph:
    """Triples plus labels, with the indexes query construction and puzzle synthesis need.

    Indexes: ``out_edges[s]``, ``by_relation[p]``, ``subjects_by[(p, o)]`` (sorted subjects),
    ``by_type[t]`` (sorted entities), ``degree``, ``in_degree`` and ``out_degree``.
    """

    triples: list[KGTriple]
    labels: dict[str, str] = field(default_factory=dict)
    descriptions: dict[str, str] = field(default_factory=dict)
    relation_labels: dict[str, str] = field(default_factory=dict)
    aliases: dict[str, list[str]] = field(default_factory=dict)
    types: dict[str, frozenset[str]] = field(default_factory=dict)
    name: str = "wikidata-subset"
    notability_measure: str = "degree"

    def __post_init__(self) -> None:
        self.triples = sorted(set(self.triples))
        self._set = set(self.triples)
        self.out_edges: dict[str, list[tuple[str, str]]] = defaultdict(list)
        self.by_relation: dict[str, list[tuple[str, str]]] = defaultdict(list)
        self.degree: Counter[str] = Counter()
        self.in_degree: Counter[str] = Counter()
        self.out_degree: Counter[str] = Counter()
        subjects: dict[Fact, list[str]] = defaultdict(list)
        for s, p, o in self.triples:  # sorted, so every index list comes out sorted
            self.out_edges[s].append((p, o))
            self.by_relation[p].append((s, o))
            subjects[(p, o)].append(s)
            self.degree[s] += 1
            self.degree[o] += 1
            self.out_degree[s] += 1
            self.in_degree[o] += 1
        self.subjects_by: dict[Fact, list[str]] = dict(subjects)
        by_type: dict[str, list[str]] = defaultdict(list)
        for qid in sorted(self.types):
            for t in self.types[qid]:
                by_type[t].append(qid)
        self.by_type: dict[str, list[str]] = dict(by_type)

    # ---- the original API (CREATE)

    def has(self, s: str, p: str, o: str) -> bool:
        return (s, p, o) in self._set

    def label(self, qid: str) -> str:
        """English label of an entity or relation; the id itself when there is none."""
        return self.labels.get(qid) or self.relation_labels.get(qid) or qid

    def has_label(self, qid: str) -> bool:
        return qid in self.labels or qid in self.relation_labels

    # ---- KnowledgeSource

    @property
    def entities(self) -> list[str]:
        """Every entity occurring in a triple, sorted."""
        return sorted(self.degree)

    def english_label(self, qid: str) -> str | None:
        return self.labels.get(qid) or self.relation_labels.get(qid)

    def aliases_of(self, qid: str) -> list[str]:
        return list(self.aliases.get(qid, []))

    def description_of(self, qid: str) -> str | None:
        return self.descriptions.get(qid)

    def types_of(self, qid: str) -> frozenset[str]:
        return self.types.get(qid, frozenset())

    def facts_of(self, qid: str) -> list[Fact]:
        return list(self.out_edges.get(qid, []))

    def subjects_with(self, relation: str, obj: str) -> list[str]:
        return list(self.subjects_by.get((relation, obj), []))

    def n_subjects_with(self, relation: str, obj: str) -> int:
        return len(self.subjects_by.get((relation, obj), ()))

    def subjects_with_all(self, facts: Sequence[Fact]) -> list[str]:
        if not facts:
            raise ValueError("subjects_with_all needs at least one fact")
        sets = sorted((set(self.subjects_by.get((p, o), ())) for p, o in facts), key=len)
        common = sets[0].intersection(*sets[1:])
        return sorted(common)

    def entities_of_types(self, types: Iterable[str]) -> list[str]:
        out: set[str] = set()
        for t in types:
            out.update(self.by_type.get(t, ()))
        return sorted(out)

    def notability(self, qid: str) -> int:
        return self.in_degree[qid] if self.notability_measure == "in_degree" else self.degree[qid]


def load_kg(root: Path | str | None = None, *, max_input_chars: int | None = None) -> KnowledgeGraph:
    """Read the Wikidata subset at ``root`` (default: :func:`kg_dir`), cached per directory.

    Every file is held to the input limits (:func:`_lines`; ``max_input_chars`` raises the line size
    limit) and its format: a triple line is ``QID PID QID``, a table line ``KEY<TAB>VALUE``. A line
    that breaks either raises :class:`KnowledgeGraphError` naming ``file:line``; none is skipped."""
    return _load_kg(str(Path(root if root is not None else kg_dir()).resolve()), max_input_chars)


@lru_cache(maxsize=4)
def _load_kg(root: str, max_chars: int | None = None) -> KnowledgeGraph:
    base = Path(root)
    triples: list[KGTriple] = []
    for name in TRIPLE_FILES:
        path = base / name
        if not path.exists():
            continue
        for lineno, line in _lines(path, max_chars):
            parts = line.split()
            if len(parts) != 3 or not (_ITEM_ID.fullmatch(parts[0]) and _PROPERTY_ID.fullmatch(parts[1])
                                       and _ITEM_ID.fullmatch(parts[2])):
                raise KnowledgeGraphError(f"{path}:{lineno}: expected a triple QID PID QID, got {line[:80]!r}")
            triples.append((parts[0], parts[1], parts[2]))
    if not triples:
        raise MissingInput(f"no triples under {base} (expected {', '.join(TRIPLE_FILES)})")
    entities = base / "Entities"
    aliases = {q: split_aliases(v) for q, v in _read_table(entities / "entity_aliases_en.txt", max_chars).items()}
    return KnowledgeGraph(
        triples,
        labels=_read_table(entities / "entity_labels_en.txt", max_chars),
        descriptions=_read_table(entities / "entity_wikidata_descriptions_en.txt", max_chars),
        relation_labels=_read_table(base / "Relations" / "relation_labels_en.txt", max_chars),
        aliases={q: a for q, a in aliases.items() if a},
        types=_read_multi(entities / "entity_types.txt", max_chars),
    )
