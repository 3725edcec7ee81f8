"""Human validation (paper §3.1) and the agreement re-annotation (App. B): the one core API that
the ipywidgets panel (:mod:`cresowlve_core.construction.review_panel`) and the marimo app
(``notebooks/review.py``) share.

A build writes its review queue to ``<build>/review/queue.jsonl`` (one card per item: Ru and En
side by side, the filters' verdicts and reasons, the flags). A reviewer opens a
:class:`ReviewSession`; every decision is appended and fsynced at once to
``<build>/review/decisions__<reviewer>.jsonl``, so a session resumes where it stopped. Items can
be split across reviewers (:func:`split_queue`). A later build applies the decisions
(:func:`apply_decisions`); the data card counts them by code.

Decision codes (:data:`DECISIONS`): ``keep``; ``fix_translation`` (with the edited English
fields, which are saved and applied); ``russian_specific``, ``needs_material``,
``several_questions``, ``outdated`` and ``other`` (with a note) remove the item.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cresowlve_core import jsonl
from cresowlve_core.construction.records import Candidate, StepOutput
from cresowlve_core.construction.vocab import CONCEPTS, DOMAIN_GROUPS, REASONING_TYPES
from cresowlve_core.failures import InputError, MissingInput, UsageError, validation_problems
from cresowlve_core.inputs import text_problem
from cresowlve_core.items import ItemView
from cresowlve_core.runtime import RunDir, now_iso
from cresowlve_core.stats import seeded_rank
from cresowlve_core.text import slug

DECISIONS: dict[str, str] = {
    "keep": "Keep: answerable, not Russian-specific, translation correct",
    "fix_translation": "Keep with a fixed translation (edit the English fields)",
    "russian_specific": "Remove: still Russian-specific",
    "needs_material": "Remove: needs external material (handout, picture)",
    "several_questions": "Remove: several questions in one (e.g. a blitz)",
    "outdated": "Remove: the answer is outdated",
    "other": "Remove: other reason (write a note)",
}
KEEP_CODES = frozenset({"keep", "fix_translation"})
EDITABLE_FIELDS = ("question", "answer", "explanation", "other_answers")
QUEUE = "queue.jsonl"
AGREEMENT_QUEUE = "agreement_queue.jsonl"


class ReviewError(UsageError, ValueError):
    """A decision that cannot be saved (unknown code, missing note or fix, unknown item)."""


class Decision(BaseModel):
    """One reviewer's decision on one item."""

    # a field under another name (``fix``, ``notes``) is no fix or note to apply as none
    model_config = ConfigDict(extra="forbid")

    item_id: str
    reviewer: str
    code: str
    note: str | None = None
    fixes: dict[str, str | None] = Field(default_factory=dict, description="edited English fields")
    at: str = ""
    en_digest: str | None = Field(None, description="the English view the reviewer saw (view_digest); a keep "
                                                    "decision applies to that translation only")


def is_stale(d: Decision, en_digest: str | None) -> bool:
    """A keep (or fix) made on another English view than the item's now (``en_digest``); a decision
    saved before decisions recorded their view is taken as it is."""
    return d.code in KEEP_CODES and d.en_digest is not None and d.en_digest != en_digest


#: the digest of no view: a decision made while the item had no translation (None is a decision
#: saved before decisions recorded their view)
NO_VIEW = "none"


def view_digest(view: ItemView | None) -> str:
    """A short digest of an item view (:data:`NO_VIEW` for none): a decision records the English it was made on."""
    if view is None:
        return NO_VIEW
    return hashlib.sha256(json.dumps(view.model_dump(), sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


class Annotation(BaseModel):
    """One reviewer's labels for one item of the agreement sample (App. B)."""

    # a field under another name (``concept``, ``reasoning``) is no label to leave out as "not labelled"
    model_config = ConfigDict(extra="forbid")

    item_id: str
    reviewer: str
    reasoning_type: str | None = None
    # None: the field was not labelled (a line written without it), never "no label applies" ([])
    concepts: list[str] | None = None
    domains: list[str] | None = None
    cultures: list[str] | None = None
    at: str = ""
    en_digest: str | None = Field(None, description="the English view the reviewer saw (view_digest); the labels are "
                                                    "scored against the model's on that translation only")


def is_stale_annotation(a: Annotation, en_digest: str | None) -> bool:
    """Labels made on another English view than the item's now (``en_digest``: the translation was run
    again or fixed); labels saved before annotations recorded their view are taken as they are."""
    return a.en_digest is not None and a.en_digest != en_digest


def _safe_name(reviewer: str) -> str:
    """The reviewer's part of a review file name (:func:`cresowlve_core.text.slug`: two reviewers
    never share a file)."""
    if not reviewer.strip():
        raise ReviewError("a reviewer name is required")
    return slug(reviewer.strip())


def _reviewer_of(file: Path, prefix: str, records: Iterable[Decision | Annotation]) -> str:
    """The reviewer a review file belongs to: as the records name them, else the file's name part."""
    return next((r.reviewer for r in records if r.reviewer), file.name.removeprefix(prefix).removesuffix(".jsonl"))


#: the start of each kind of review file's name: ``<prefix><reviewer>.jsonl`` (:func:`_safe_name`)
REVIEW_FILE_PREFIX: dict[type[BaseModel], str] = {Decision: "decisions__", Annotation: "annotations__"}


def reviewer_key(name: str) -> str:
    """Who a reviewer's name names: names that differ only in letter case, Unicode normalisation form
    (``José`` with é as one character or as ``e`` and a combining accent) or spacing name one reviewer."""
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", " ".join(name.split())).casefold())


def review_dir(build_dir: str | Path) -> Path:
    return Path(build_dir) / "review"


def embedded_models(build_dir: str | Path) -> list[str]:
    """The names of the embedded 270M base model among the models whose verdicts, translations and
    puzzles a build's review cards show: a construction build's steps (``build.json``) or a synthetic
    build's served models (``summary.json``). Empty when the build recorded neither file."""
    from cresowlve_core.banners import is_embedded_model

    found: set[str] = set()
    for name in ("build.json", "summary.json"):
        path = Path(build_dir) / name
        if not path.is_file():
            continue
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError(f"{path}: cannot be read ({exc})") from None
        for step in (record.get("models") or {}).values():  # construction: {step: {model, embedded, ...}}
            if isinstance(step, dict) and (step.get("embedded") or is_embedded_model(step.get("model"))):
                found.add(str(step.get("model")))
        for served in (record.get("served_models") or {}).values():  # synthetic: {step: {model: calls}}
            found.update(str(m) for m in (served if isinstance(served, dict) else {}) if is_embedded_model(str(m)))
    return sorted(found)


#: when a decision with no time (``at``: a hand-written line without one) was made: before every dated one
UNDATED = datetime.min.replace(tzinfo=UTC)


def decision_time(at: str) -> datetime:
    """The moment a decision's ``at`` names (:data:`UNDATED` for none), comparable across time zones: the
    latest decision wins a conflict between reviewers (:func:`load_decisions`)."""
    if not at:
        return UNDATED
    try:
        when = datetime.fromisoformat(at)
    except ValueError:
        when = None
    if when is None or when.tzinfo is None:
        raise ReviewError(f"'at' must be an ISO 8601 time with a time zone, as the sessions save it "
                          f"(2026-01-31T09:00:00+00:00), got {at!r}")
    return when


def _check_decision(d: Decision) -> None:
    """A saved decision holds to the rules a session saves it by (:func:`validate_decision`): a hand-edited
    fix of a field that is not an English field (``Question``) would otherwise be applied as no fix at all;
    an ``at`` that is not a time would decide which reviewer's decision is the latest."""
    if d.code not in DECISIONS:
        raise ReviewError(f"unknown decision {d.code!r} for {d.item_id!r}; one of {', '.join(DECISIONS)}")
    validate_decision(d.code, d.note, d.fixes)
    decision_time(d.at)


def _check_annotation(a: Annotation) -> None:
    validate_annotation(a.reasoning_type, a.concepts or [], a.domains or [])


def _utf8(value: Any) -> bool:
    """Whether every string of a JSON value can be written as UTF-8 (JSON allows a lone surrogate escape)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def read_review_file(path: Path, kind: type[Decision] | type[Annotation]) -> dict[str, Any]:
    """item id -> the latest :class:`Decision` (or :class:`Annotation`) of one reviewer's file, as
    the sessions save them (a torn last line is skipped). A line that is not one (not a JSON object,
    no ``item_id``, an unknown decision code, a label outside its vocabulary: a hand edit) is an
    :class:`InputError` naming ``file:line``, never a record applied or scored as something else."""
    latest: dict[str, Any] = {}
    if not path.exists():
        return latest
    check = _check_decision if kind is Decision else _check_annotation
    prefix = REVIEW_FILE_PREFIX[kind]
    owner = path.name.removeprefix(prefix).removesuffix(".jsonl")  # the reviewer's part of the name (_safe_name)
    for lineno, rec in jsonl.iter_jsonl_numbered(path, torn_tail_ok=True, error=InputError, what=kind.__name__.lower()):
        try:
            if not _utf8(rec):
                raise ReviewError("text that is not valid Unicode (a lone surrogate such as \\udcff, which cannot be "
                                  "written as UTF-8)")
            record = kind.model_validate(rec)
            if not record.item_id.strip():
                raise ReviewError("empty item_id")
            check(record)  # type: ignore[arg-type]
            if record.reviewer.strip() and _safe_name(record.reviewer) != owner:
                # one file per reviewer: another reviewer's lines pasted in, or a copy of a reviewer's file,
                # would be merged into one reviewer or counted twice
                raise ReviewError(f"reviewer {record.reviewer!r} in a file of reviewer {owner!r}: each "
                                  f"{prefix}<reviewer>.jsonl holds the {kind.__name__.lower()}s of the reviewer "
                                  f"it is named after; the file of reviewer {record.reviewer!r} is "
                                  f"{prefix}{_safe_name(record.reviewer)}.jsonl")
        except (ValidationError, ReviewError) as exc:
            why = validation_problems(exc, "record") if isinstance(exc, ValidationError) else str(exc)
            raise InputError(f"{path}:{lineno}: not a saved {kind.__name__.lower()} ({why})") from None
        latest[record.item_id] = record
    return latest


def _same_name(name: str, other: str) -> str:
    """``'name' is reviewer 'other'``, saying so when the two look alike but are written with other code points."""
    looks_alike = name != other and unicodedata.normalize("NFC", name) == unicodedata.normalize("NFC", other)
    return f"reviewer {name!r} is reviewer {other!r}" + (f" ({ascii(name)} and {ascii(other)})" if looks_alike else "")


def read_reviewers(rdir: Path, kind: type[Decision] | type[Annotation]) -> dict[str, tuple[str, Path, dict[str, Any]]]:
    """:func:`reviewer_key` -> (the reviewer's name, their file, :func:`read_review_file` of it) for every
    review file of ``kind`` in the review folder ``rdir``. Two files of one reviewer (``Dan`` and ``dan``)
    are an :class:`InputError` naming both: each would count as a reviewer of its own."""
    prefix = REVIEW_FILE_PREFIX[kind]
    out: dict[str, tuple[str, Path, dict[str, Any]]] = {}
    for f in sorted(rdir.glob(f"{prefix}*.jsonl")):
        latest = read_review_file(f, kind)
        name = _reviewer_of(f, prefix, latest.values())
        if (key := reviewer_key(name)) in out:
            other, other_file, _ = out[key]
            raise InputError(f"{f}: {_same_name(name, other)} of {other_file}: names that differ only in "
                             "letter case, Unicode normalisation form or spacing are one reviewer, whose "
                             f"{kind.__name__.lower()}s are one file; keep one of the two files (copy the other's lines "
                             "into it, with its reviewer's name)")
        out[key] = (name, f, latest)
    return out


def is_review_folder_file(name: str) -> bool:
    """Whether a file of the review folder is one the build writes or reads: a queue, a review file
    (``<prefix><reviewer>.jsonl``), or either's ``.torn`` (a torn last line set aside,
    :mod:`cresowlve_core.runtime.rundir`) or ``.tmp`` (a write that was stopped, :func:`jsonl.write_jsonl`)."""
    name = name.removesuffix(".torn").removesuffix(".tmp")
    return name in (QUEUE, AGREEMENT_QUEUE) or any(name.startswith(prefix) and name.endswith(".jsonl")
                                                   for prefix in REVIEW_FILE_PREFIX.values())


def refuse_unread_files(rdir: Path) -> None:
    """Raise :class:`InputError` naming the first file of the review folder that the build would not read
    (``annotations_dan.jsonl``, ``dan.json``, ``decisions__dan.jsonl.bak``): a reviewer's work there would
    be left out without a word. Hidden files and folders are not looked at."""
    for f in sorted(rdir.iterdir()) if rdir.is_dir() else ():
        if f.is_file() and not f.name.startswith(".") and not is_review_folder_file(f.name):
            raise InputError(f"{f}: not a review file, so not read: decisions are read from "
                             f"{REVIEW_FILE_PREFIX[Decision]}<reviewer>.jsonl and agreement labels from "
                             f"{REVIEW_FILE_PREFIX[Annotation]}<reviewer>.jsonl; rename it so, or move it out of {rdir}")


def _refuse_another_file_of(rdir: Path, kind: type[Decision] | type[Annotation], reviewer: str, file: str) -> None:
    """Raise :class:`ReviewError` when the review folder holds ``reviewer``'s ``kind`` file under another
    spelling of their name (:func:`reviewer_key`) than ``file``: a session would start a second one."""
    saved = read_reviewers(rdir, kind).get(reviewer_key(reviewer)) if rdir.is_dir() else None
    if saved is not None and saved[1].name != file:
        raise ReviewError(f"{_same_name(reviewer, saved[0])} of {saved[1]} (names that differ only in "
                          f"letter case, Unicode normalisation form or spacing are one reviewer): open the session "
                          f"as {saved[0]!r}")


# ---------------------------------------------------------------------------------------------
# The queue
# ---------------------------------------------------------------------------------------------


def review_card(c: Candidate) -> dict[str, Any]:
    """What a reviewer sees of one item: Ru and En side by side, verdicts with reasons, flags (the
    steps' and the pack parser's: a merged ``duplicate_field:answer`` is for a human to see)."""
    v = c.verdicts
    nm, rs, tr = v.get("needs_material") or {}, v.get("russian_specific") or {}, v.get("translate") or {}
    return {
        "id": c.id, "difficulty": c.difficulty,
        "ru": c.ru.model_dump(), "en": c.en.model_dump() if c.en else None, "en_digest": view_digest(c.en),
        "needs_material": {"llm": nm.get("yes"), "reason": nm.get("reason"), "precheck": nm.get("precheck", [])},
        "russian_specific": {"llm": rs.get("yes"), "reason": rs.get("reason")},
        "translation_flags": list(tr.get("flags", [])) + [f"placeholder_lost:{p}" for p in tr.get("lost_placeholders", [])],
        "review_flags": list(c.review_flags), "parser_flags": list(c.parser_flags), "handout": c.handout,
        "provenance": c.provenance,
        "model_labels": {"reasoning_type": c.reasoning_type, "concepts": c.concepts, "domains": c.domains,
                         "cultures": c.cultures},
    }


def write_queue(build_dir: str | Path, cands: Sequence[Candidate], name: str = QUEUE) -> Path:
    """Write (replace) a queue file of review cards; decisions already saved are untouched."""
    run = RunDir(review_dir(build_dir))
    path = run.path / name
    return jsonl.write_jsonl(path, (review_card(c) for c in cands), transform=run.scrub)


def load_queue(build_dir: str | Path, name: str = QUEUE) -> list[dict[str, Any]]:
    """The review cards of a build, in queue order. A missing queue is a clear error."""
    path = review_dir(build_dir) / name
    if not path.exists():
        raise MissingInput(f"{path}: no review queue; run the build up to the review step first")
    cards = []
    for lineno, card in jsonl.read_jsonl_numbered(path, error=InputError, what="review card"):
        if not isinstance(card.get("id"), str) or not card["id"].strip():
            raise InputError(f"{path}:{lineno}: a review card needs an 'id' (a non-empty string), got {card.get('id')!r}")
        for view in ("ru", "en"):
            if card.get(view) is not None and not isinstance(card[view], dict):
                raise InputError(f"{path}:{lineno}: the card's {view!r} view is not an object (question, answer, ...), "
                                 f"got {type(card[view]).__name__}")
        cards.append(card)
    return cards


def split_queue(ids: Sequence[str], reviewers: Sequence[str], *, seed: int = 0) -> dict[str, list[str]]:
    """Share items among reviewers: a seeded shuffle dealt round-robin (sizes differ by at most one). A
    reviewer named twice (:func:`reviewer_key`: ``ann`` and ``Ann``) is a :class:`ReviewError`: they would get two shares."""
    if not reviewers:
        raise ReviewError("at least one reviewer is required")
    seen: dict[str, str] = {}
    for r in reviewers:
        if (first := seen.get(reviewer_key(r))) is not None:
            raise ReviewError(f"reviewer {r!r} is named twice ({first!r} and {r!r}; names that differ only in letter "
                              "case, Unicode normalisation form or spacing are one reviewer): each would get a share")
        seen[reviewer_key(r)] = r
    order = list(ids)
    random.Random(seed).shuffle(order)
    out: dict[str, list[str]] = {r: [] for r in reviewers}
    for i, item in enumerate(order):
        out[reviewers[i % len(reviewers)]].append(item)
    return out


# ---------------------------------------------------------------------------------------------
# A reviewer's session
# ---------------------------------------------------------------------------------------------


def validate_decision(code: str, note: str | None = None, fixes: dict[str, str | None] | None = None) -> None:
    """Raise :class:`ReviewError` for an unknown code, ``other`` without a note, edited English fields
    with another code than ``fix_translation``, or ``fix_translation`` without any."""
    if code not in DECISIONS:
        raise ReviewError(f"unknown decision {code!r}; use one of {', '.join(DECISIONS)}")
    if code == "other" and not (note or "").strip():
        raise ReviewError("decision 'other' needs a note saying why")
    if fixes and code != "fix_translation":  # only a fix_translation applies edited English fields
        raise ReviewError(f"decision {code!r} with edited English field(s) {sorted(fixes)}: an edit is applied only "
                          "with the decision 'fix_translation'")
    if code == "fix_translation":
        bad = sorted(set(fixes or {}) - set(EDITABLE_FIELDS))
        if bad:
            raise ReviewError(f"cannot edit field(s) {bad}; editable: {', '.join(EDITABLE_FIELDS)}")
        if not fixes:
            raise ReviewError("decision 'fix_translation' needs at least one edited English field")
        for f in ("question", "answer"):
            if f in fixes and not (fixes[f] or "").strip():
                raise ReviewError(f"the English {f} cannot be empty")
        for f, value in fixes.items():  # an edited field is held to the rules of any input an eval reads
            if value and value.strip() and (why := text_problem(value, f"the English {f}", size_limited=False)):
                raise ReviewError(why)


class ReviewSession:
    """One reviewer working through a queue (all of it, or the ``assigned`` ids)."""

    def __init__(self, build_dir: str | Path, reviewer: str, *, assigned: Iterable[str] | None = None,
                 queue: str = QUEUE):
        self.reviewer = reviewer.strip()
        self.file = f"decisions__{_safe_name(reviewer)}.jsonl"
        cards = load_queue(build_dir, queue)  # first: a missing queue creates no directory
        self.run = RunDir(review_dir(build_dir))
        if assigned is not None:
            wanted = set(assigned)
            unknown = wanted - {c["id"] for c in cards}
            if unknown:
                raise ReviewError(f"{len(unknown)} assigned id(s) are not in the queue: {sorted(unknown)[:5]}")
            cards = [c for c in cards if c["id"] in wanted]
        self.cards = cards
        self._by_id = {c["id"]: c for c in cards}
        _refuse_another_file_of(self.run.path, Decision, self.reviewer, self.file)
        saved = read_review_file(self.run.path / self.file, Decision)
        # a keep made on another English view than the card's is to be made again (the translation was re-run)
        self.decisions: dict[str, Decision] = {k: d for k, d in saved.items() if k in self._by_id
                                               and not is_stale(d, self._by_id[k].get("en_digest"))}

    @property
    def pending(self) -> list[dict[str, Any]]:
        return [c for c in self.cards if c["id"] not in self.decisions]

    def next_card(self) -> dict[str, Any] | None:
        """The first card without a decision (where a resumed session continues), or None."""
        pend = self.pending
        return pend[0] if pend else None

    def progress(self) -> tuple[int, int]:
        return len(self.decisions), len(self.cards)

    def decide(self, item_id: str, code: str, *, note: str | None = None,
               fixes: dict[str, str | None] | None = None) -> Decision:
        """Validate and save one decision at once (appended, fsynced). A later decision on the
        same item supersedes the earlier one."""
        if item_id not in self._by_id:
            raise ReviewError(f"item {item_id!r} is not in this reviewer's queue")
        validate_decision(code, note, fixes)
        d = Decision(item_id=item_id, reviewer=self.reviewer, code=code, note=(note or "").strip() or None,
                     fixes=dict(fixes or {}) if code == "fix_translation" else {}, at=now_iso(),
                     en_digest=self._by_id[item_id].get("en_digest"))
        self.run.append(self.file, d.model_dump())
        self.decisions[item_id] = d
        return d


def load_decisions(build_dir: str | Path) -> tuple[dict[str, Decision], dict[str, Any]]:
    """Every reviewer's latest decision per item, merged: the most recent decision wins where
    reviewers disagree (each conflict is counted). Returns ``(decisions, report)``."""
    rdir = review_dir(build_dir)
    if not rdir.exists():
        return {}, {"reviewers": [], "n_conflicts": 0, "n_undated_conflicts": 0}
    refuse_unread_files(rdir)
    per_item: dict[str, list[Decision]] = {}
    reviewers = []
    for name, _, latest in read_reviewers(rdir, Decision).values():
        reviewers.append(name)
        for d in latest.values():
            per_item.setdefault(d.item_id, []).append(d)
    merged, conflicts = {}, []
    for item, ds in per_item.items():
        ds.sort(key=lambda d: decision_time(d.at))
        merged[item] = ds[-1]
        if len({d.code for d in ds}) > 1:
            # a decision with no time (a hand-written line without "at") sorts first: not "the latest" one
            conflicts.append({"item_id": item, "codes": {d.reviewer: d.code for d in ds},
                              "undated": any(not d.at for d in ds)})
    return merged, {"reviewers": reviewers, "n_conflicts": len(conflicts), "conflicts": conflicts,
                    "n_undated_conflicts": sum(c["undated"] for c in conflicts)}


def apply_decisions(cands: Sequence[Candidate], decisions: dict[str, Decision]) -> StepOutput:
    """Apply saved decisions: removal codes remove, ``fix_translation`` replaces the edited English
    fields (and clears the translation flags), ``keep`` keeps. Items without a decision are kept
    and counted as ``unreviewed``; so is an item whose English view is no longer the one a ``keep``
    or ``fix_translation`` was made on (the translation was run again): counted ``stale``, flagged
    ``human:stale_decision``. A ``fix_translation`` that leaves the English question or answer empty (an item
    with no translation, fixed in some fields only) is not applied: counted ``fix_incomplete`` instead, flagged
    ``human:fix_incomplete``. Never modifies the inputs."""
    kept, removed = [], []
    codes: Counter[str] = Counter()
    for c in cands:
        d = decisions.get(c.id)
        if d is None:
            codes["unreviewed"] += 1
            kept.append(c)
            continue
        if is_stale(d, view_digest(c.en)):
            codes["stale"] += 1
            kept.append(c.model_copy(update={"review_flags": [*c.review_flags, "human:stale_decision"]}))
            continue
        verdict = {"code": d.code, "reviewer": d.reviewer, "note": d.note, "fixes": d.fixes}
        if d.code not in KEEP_CODES:
            codes[d.code] += 1
            removed.append(c.with_verdict("human", verdict))
            continue
        update: dict[str, Any] = {}
        applied = d.code  # by_code counts what was done to the item: each item under one code
        if d.code == "fix_translation":
            base: dict[str, Any] = c.en.model_dump() if c.en else {f: None for f in EDITABLE_FIELDS}
            base.update({k: (v if (v or "").strip() else None) for k, v in d.fixes.items()})
            if not base.get("question") or not base.get("answer"):
                applied = "fix_incomplete"
                update["review_flags"] = [*c.review_flags, "human:fix_incomplete"]
            else:
                update["en"] = ItemView(**base)
                update["review_flags"] = [f for f in c.review_flags if not f.startswith("translate:")]
        codes[applied] += 1
        new = c.with_verdict("human", verdict)
        kept.append(new.model_copy(update=update))
    return StepOutput("human_validation", kept, removed, {"by_code": dict(codes)})


# ---------------------------------------------------------------------------------------------
# Agreement re-annotation (App. B)
# ---------------------------------------------------------------------------------------------


def agreement_sample(ids: Sequence[str], n: int = 50, *, seed: int = 0) -> list[str]:
    """A seeded sample of ``n`` ids (all of them if fewer), in input order: the ``n`` of lowest
    :func:`~cresowlve_core.stats.seeded_rank` of the seed and the id. An item's place depends on its id only, so the sample that reviewers are
    labelling stays as it is when a later build has other items (one removed in human validation:
    only a sampled item that left is replaced, by the next in rank)."""
    chosen = set(sorted(set(ids), key=lambda i: seeded_rank(seed, i))[:n])
    return [i for i in ids if i in chosen]


def parse_cultures(text: str | None) -> list[str]:
    """Cultures typed as free text: comma-separated (semicolons and new lines too), trimmed,
    inner spaces collapsed, lower case, duplicates dropped, order kept."""
    parts = re.split(r"[,;\n]", text or "")
    return list(dict.fromkeys(" ".join(p.split()).lower() for p in parts if p.strip()))


def validate_annotation(reasoning_type: str | None, concepts: Iterable[str], domains: Iterable[str]) -> None:
    """Raise :class:`ReviewError` for a reasoning type, concept or domain group outside its vocabulary."""
    if reasoning_type is not None and reasoning_type not in REASONING_TYPES:
        raise ReviewError(f"reasoning type must be one of {REASONING_TYPES}, got {reasoning_type!r}")
    bad = sorted(set(concepts) - set(CONCEPTS))
    if bad:
        raise ReviewError(f"unknown concept(s) {bad}")
    bad = sorted(set(domains) - set(DOMAIN_GROUPS))
    if bad:
        raise ReviewError(f"unknown domain group(s) {bad}")


class AnnotationSession:
    """A reviewer labelling the agreement sample; saved at once to ``annotations__<reviewer>.jsonl``."""

    def __init__(self, build_dir: str | Path, reviewer: str):
        self.reviewer = reviewer.strip()
        self.file = f"annotations__{_safe_name(reviewer)}.jsonl"
        self.cards = load_queue(build_dir, AGREEMENT_QUEUE)  # first: a missing queue creates no directory
        self.run = RunDir(review_dir(build_dir))
        self._by_id = {c["id"]: c for c in self.cards}
        self._ids = set(self._by_id)
        _refuse_another_file_of(self.run.path, Annotation, self.reviewer, self.file)
        saved = read_review_file(self.run.path / self.file, Annotation)
        # labels made on another English view than the card's are to be made again (the translation changed)
        self.annotations: dict[str, Annotation] = {k: a for k, a in saved.items() if k in self._ids
                                                   and not is_stale_annotation(a, self._by_id[k].get("en_digest"))}

    def next_card(self) -> dict[str, Any] | None:
        """The first sampled item this reviewer has not labelled (where a resumed session continues)."""
        return next((c for c in self.cards if c["id"] not in self.annotations), None)

    def progress(self) -> tuple[int, int]:
        """(annotated, sample size)."""
        return len(self.annotations), len(self.cards)

    def annotate_form(self, item_id: str, *, reasoning_type: str | None, concepts: Iterable[str] = (),
                      domains: Iterable[str] = (), cultures: str | None = "") -> Annotation:
        """What the panel and the app call: like :meth:`annotate`, but the reasoning type must be
        chosen and the cultures are the free text of the form (see :func:`parse_cultures`)."""
        if reasoning_type in (None, ""):
            raise ReviewError(f"choose a reasoning type ({' or '.join(REASONING_TYPES)})")
        return self.annotate(item_id, reasoning_type=reasoning_type, concepts=concepts, domains=domains,
                             cultures=parse_cultures(cultures))

    def annotate(self, item_id: str, *, reasoning_type: str | None, concepts: Iterable[str] = (),
                 domains: Iterable[str] = (), cultures: Iterable[str] = ()) -> Annotation:
        """Validate and save one item's labels at once (appended, fsynced); a later annotation of
        the same item supersedes the earlier one. Cultures are normalised to lower case."""
        if item_id not in self._ids:
            raise ReviewError(f"item {item_id!r} is not in the agreement sample")
        concepts, domains = list(dict.fromkeys(concepts)), list(dict.fromkeys(domains))
        validate_annotation(reasoning_type, concepts, domains)
        cultures = list(dict.fromkeys(" ".join(c.split()).lower() for c in cultures if c.strip()))
        a = Annotation(item_id=item_id, reviewer=self.reviewer, reasoning_type=reasoning_type, concepts=concepts,
                       domains=domains, cultures=cultures, at=now_iso(), en_digest=self._by_id[item_id].get("en_digest"))
        self.run.append(self.file, a.model_dump())
        self.annotations[item_id] = a
        return a


def load_annotations(build_dir: str | Path) -> dict[str, dict[str, Annotation]]:
    """reviewer -> item id -> latest annotation, for every reviewer of the agreement sample."""
    rdir = review_dir(build_dir)
    out: dict[str, dict[str, Annotation]] = {}
    if not rdir.exists():
        return out
    refuse_unread_files(rdir)
    for name, _, latest in read_reviewers(rdir, Annotation).values():
        out[name] = latest
    return out
