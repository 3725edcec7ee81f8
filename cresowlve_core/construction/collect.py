"""Step 1, collect (paper §3.1): packs or a published dataset -> deduplicated, sampled candidates.

- Any number of packs (db.chgk.info text or 4s; a folder means every ``*.txt``/``*.4s`` in it), a
  published-schema file with Russian rows, an Item JSONL, or ``hub:ru``.
- Global dedup on the content id (normalised question + answer); every duplicate is counted and
  written out, never dropped silently. A dataset file is held to the rules of the items reader
  (:func:`~cresowlve_core.sources.sample.validate_items`): two rows with one id, or text that
  cannot be sent (a lone surrogate), are refused with one line naming the ids.
- A question with no Cyrillic letter (a published file's English config, an English-language
  pack) is set aside as unusable (``not_russian``) and counted: the build translates from Russian.
- A stratified sample by difficulty: ``per_level`` items per level 1-5, seeded. Items without a
  difficulty are kept and reported as ``unrated``.
- ``per_level`` and ``limit`` keep the items of lowest seeded rank (:data:`SAMPLE_RULE`): a digest of the
  seed and the item's id alone, so the samples of one seed are nested: the items of ``limit=10`` are
  among those of ``limit=20`` (and of ``per_level=5`` among those of ``per_level=10``), and a pilot build
  extended with a larger limit keeps its items.
- Every parser flag is carried on the candidate and counted. Blocks with no question or no answer
  cannot enter the benchmark: they are set aside as ``unusable`` and counted.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cresowlve_core.construction.records import Candidate, StepOutput
from cresowlve_core.failures import MissingInput
from cresowlve_core.items import ChgkQuestion, ItemView
from cresowlve_core.paths import shipped_data
from cresowlve_core.stats import seeded_rank

log = logging.getLogger(__name__)

#: The shipped packs: the default input of a build.
PACK_SUFFIXES = (".txt", ".4s")
#: how a build runs without the hub (the end of its error when hub:ru cannot be had)
BUILD_OFFLINE_HINT = ("to build offline, pass local sources instead: --source PATH.parquet or PATH.jsonl (published "
                      "schema, Russian rows), a pack file or a folder of packs")
LEVELS = (1, 2, 3, 4, 5)
#: How ``per_level`` and ``limit`` choose items, recorded in the collected step's manifest and the collect
#: report: the items of lowest :func:`seeded_rank` of the seed and their id (nested samples). Builds
#: written before it recorded none: they drew with ``random.Random(seed).sample``, not nested.
SAMPLE_RULE = "seeded-rank"


_CYRILLIC = re.compile(r"[\u0400-\u04ff]")


def is_russian(question: str) -> bool:
    """The question has Cyrillic letters: the Russian source the build translates. One with none
    (an English row or pack) is set aside as ``not_russian``, never translated from English as if Russian."""
    return _CYRILLIC.search(question) is not None


def _pack_files(spec: str) -> list[Path]:
    path = Path(spec)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix.lower() in PACK_SUFFIXES)  # B.TXT too, as --source B.TXT
        if not files:
            raise MissingInput(f"{spec}: no *.txt or *.4s packs in this folder")
        return files
    if not path.is_file():
        raise MissingInput(f"{spec!r} is not a pack file, a folder of packs, a dataset file or hub:ru")
    return [path]


def question_to_candidate(q: ChgkQuestion, url: str | None = None) -> Candidate:
    """A parsed pack question as a build candidate (its comment is the explanation, its zachet the
    other answers; its nezachet, which the published schema has no field for, stays in the provenance
    a reviewer sees and ``full.jsonl`` keeps)."""
    return Candidate(
        id=q.id, difficulty=q.difficulty,
        ru=ItemView(question=q.question, answer=q.answer.strip(), explanation=q.comment, other_answers=q.other_answers),
        handout=q.handout, parser_flags=list(q.flags),
        provenance={"source_file": q.source_file, "tournament": q.tournament, "tour": q.tour, "number": q.number,
                    "date": q.date, "authors": q.authors, "sources": q.sources, "url": url,
                    "take_rate": q.take_rate, "rejected_answers": q.rejected_answers},
    )


def _read_source(spec: str, max_input_chars: int | None = None) -> tuple[list[Candidate], list[dict[str, Any]],
                                                                        dict[str, Any]]:
    """Candidates, unusable blocks and a per-source report from one input spec, held to the input
    limits (:mod:`cresowlve_core.inputs`: a bad pack or row raises a ``ValueError`` naming ``file:line``)."""
    from cresowlve_core.sources.chgk import read_pack_checked

    cands: list[Candidate] = []
    unusable: list[dict[str, Any]] = []
    if spec == "hub:ru" or (Path(spec).suffix in (".jsonl", ".parquet") and Path(spec).is_file()):
        from cresowlve_core.sources.hub import load_published, loaded_files, read_jsonl_objects, read_published_file
        from cresowlve_core.sources.sample import check_input_limits, read_items_jsonl, validate_items

        path = Path(spec)
        wheres = None  # file:line of each item (both JSONL readers keep one item per row)
        if spec == "hub:ru":
            items = load_published("ru", offline_hint=BUILD_OFFLINE_HINT)
        elif path.suffix == ".jsonl" and _is_item_jsonl(path):
            items = read_items_jsonl(path)
        else:
            items = read_published_file(path, "ru")
        if path.suffix == ".jsonl" and path.is_file():
            wheres = [f"{path}:{lineno}" for lineno, _ in read_jsonl_objects(path)]
        validate_items(items, spec)  # duplicate ids, text that cannot be sent (a lone surrogate): refused, as by load_items
        check_input_limits(items, "ru", wheres, spec, max_input_chars)
        for it in items:
            if it.ru is None:  # e.g. an English-only item: nothing to build from, but counted
                unusable.append({"id": it.id, "source_file": spec, "number": None, "flags": ["no_ru_view"]})
                continue
            if not is_russian(it.ru.question):  # a published file has no language: en/test.parquet reads as "ru"
                unusable.append({"id": it.id, "source_file": spec, "number": None, "flags": ["not_russian"]})
                continue
            cands.append(Candidate(id=it.id, difficulty=it.difficulty, ru=it.ru, en=None,
                                   provenance={"source_file": spec, **{k: v for k, v in it.meta.items()
                                                                       if isinstance(v, (str, int, float))}}))
        files = loaded_files(items)  # hub:ru: the snapshot's revision and files, with their SHA-256
        return cands, unusable, {"source": spec, "kind": "dataset", "n": len(items),
                                 **({"items_files": files} if files else {})}
    reports = []
    for f in _pack_files(spec):
        rep = read_pack_checked(f, max_input_chars=max_input_chars)
        url = next((h["url"] for h in rep.headers if h.get("url")), None)
        for q in rep.questions:
            if "missing_question" in q.flags or "missing_answer" in q.flags:
                unusable.append({"id": q.id, "source_file": q.source_file, "number": q.number, "flags": q.flags})
            elif not is_russian(q.question):  # e.g. a pack of an English-language tournament
                unusable.append({"id": q.id, "source_file": q.source_file, "number": q.number,
                                 "flags": [*q.flags, "not_russian"]})
            else:
                cands.append(question_to_candidate(q, url))
        reports.append({"source": str(f), "kind": rep.format, "encoding": rep.encoding, "n": rep.n_blocks,
                        "n_flagged": rep.n_flagged, "pack_flags": rep.pack_flags})
    return cands, unusable, {"source": spec, "kind": "packs", "files": reports,
                             "n": sum(r["n"] for r in reports)}


def _is_item_jsonl(path: Path) -> bool:
    """True for one Item per line (nested ``ru``/``en`` views), False for published-schema rows; the
    first row decides, read by the items reader (a byte-order mark is fine; a file that is not UTF-8
    JSON Lines of objects is an :class:`~cresowlve_core.sources.hub.ItemsFileError` naming its line)."""
    from cresowlve_core.sources.hub import iter_jsonl_objects

    first = next(iter_jsonl_objects(path), None)
    return first is None or "question" not in first[1]


def lowest_ranked(cands: Sequence[Candidate], n: int, seed: int) -> set[str]:
    """The ids of the ``n`` candidates of lowest seeded rank (all of them if fewer): a candidate's
    rank depends on the seed and its id alone, so the ``n`` chosen are among the ``n + 1`` chosen."""
    return set(sorted((c.id for c in cands), key=lambda i: seeded_rank(seed, "sample", i))[:n])


def stratified_sample(cands: Sequence[Candidate], per_level: int | None, seed: int) -> list[Candidate]:
    """Up to ``per_level`` candidates of each difficulty 1-5 (the lowest in seeded rank), plus every
    unrated one. ``per_level=None`` keeps everything. Input order is kept."""
    if per_level is None:
        return list(cands)
    chosen: set[str] = set()
    for level in LEVELS:
        chosen |= lowest_ranked([c for c in cands if c.difficulty == level], per_level, seed)
    return [c for c in cands if c.difficulty is None or c.id in chosen]


def collect(sources: Sequence[str] | None = None, *, per_level: int | None = None, seed: int = 0,
            limit: int | None = None, max_input_chars: int | None = None) -> tuple[StepOutput, dict[str, Any]]:
    """Read, deduplicate and sample (see the module docstring).

    ``limit`` keeps that many of lowest seeded rank after sampling (small demo builds; the data card
    says so): the items of a smaller limit are among those of a larger one. Returns the step output (``removed`` holds nothing: duplicates and
    unusable blocks are in the report) and a report with the per-source counts, the duplicates
    and the unusable blocks.
    """
    sources = list(sources or [str(shipped_data("chgk"))])
    all_cands: list[Candidate] = []
    unusable: list[dict[str, Any]] = []
    per_source = []
    for spec in sources:
        cands, bad, rep = _read_source(spec, max_input_chars)
        all_cands += cands
        unusable += bad
        per_source.append(rep)
    seen: dict[str, Candidate] = {}
    duplicates = []
    for c in all_cands:
        if c.id in seen:
            duplicates.append({"id": c.id, "kept_from": seen[c.id].provenance.get("source_file"),
                               "dropped_from": c.provenance.get("source_file"),
                               "number": c.provenance.get("number")})
        else:
            seen[c.id] = c
    unique = list(seen.values())
    sampled = stratified_sample(unique, per_level, seed)
    n_unrated_sampled = sum(c.difficulty is None for c in sampled)
    if per_level is not None and n_unrated_sampled:  # the sample does not cap these: said, not silent
        log.warning("per_level=%d samples difficulty levels 1-5 only: %d of the %d sampled items have no difficulty "
                    "and are all kept", per_level, n_unrated_sampled, len(sampled))
    limited = sampled
    if limit is not None and limit < len(sampled):
        keep = lowest_ranked(sampled, limit, seed)
        limited = [c for c in sampled if c.id in keep]
    by_level = Counter(str(c.difficulty) if c.difficulty else "unrated" for c in limited)
    flags = Counter(f for c in limited for f in c.parser_flags)
    counts = {"n_read": len(all_cands) + len(unusable), "n_unusable": len(unusable),
              "n_duplicates": len(duplicates), "n_unique": len(unique), "n_sampled": len(sampled),
              "limit": limit, "by_difficulty": dict(sorted(by_level.items())),
              "n_unrated": by_level.get("unrated", 0), "parser_flags": dict(flags)}
    out = StepOutput("collect", kept=limited, counts=counts)
    report = {"sources": per_source, "duplicates": duplicates, "unusable": unusable, "per_level": per_level,
              "seed": seed, "sample": SAMPLE_RULE}
    return out, report
