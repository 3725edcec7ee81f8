"""The demo item set shipped with the project, and :func:`load_items`, the one way to get items.

The demo set is built from the 15 real items quoted in the CresOWLve paper
(``data/cresowlve/paper_examples.jsonl``) into ``data/cresowlve/demo_items.jsonl``, one
``Item.model_dump()`` per line. Each item keeps where it came from and what the construction
pipeline did with it in ``meta``: ``pipeline_outcome``, ``source`` and ``in_benchmark`` (true
for outcomes starting with ``kept`` or ``translated``). Fields of an example that fit no part of
the item (a Russian question without a Russian answer, say) are kept in ``meta`` under their own
names. Rebuild with ``python -m cresowlve_core.sources.build_demo``.

:func:`load_items` checks every item set before anything is sent to a model, and refuses a bad
one with one :class:`~cresowlve_core.sources.hub.ItemsFileError` line naming the file and line
(or the item ids): a file that is not UTF-8 (a UTF-8 BOM is fine), a JSON array instead of JSON
Lines, a line that is not a JSON object, an invalid field (a difficulty other than 1-5 or null, an
``Item`` row with neither an ``en`` nor a ``ru`` view), **duplicate ids** (an error, not a
silent rename: records are keyed by id, so a duplicate would overwrite another item's result),
and **text that is not valid Unicode** (a lone surrogate such as ``"\\udcff"`` is valid JSON
but cannot be sent as UTF-8; the item is rejected by id rather than silently altered).
"""

from __future__ import annotations

import itertools
import json
import logging
import unicodedata
from array import array
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cresowlve_core import jsonl, outfiles
from cresowlve_core.failures import InputError, MissingInput, UsageError
from cresowlve_core.inputs import text_problem
from cresowlve_core.items import LANGS, REASONING_TYPES, Item, ItemView, Lang
from cresowlve_core.paths import data_dir, shipped_data
from cresowlve_core.sources.hub import (
    ItemsFileError,
    difficulty_level,
    file_errors_first,
    iter_jsonl_objects,
    load_published,
    published_items,
    published_jsonl_rows,
    read_published_file,
)

log = logging.getLogger(__name__)

DEMO_SOURCE_NAME = "cresowlve/paper_examples.jsonl"
DEMO_ITEMS_NAME = "cresowlve/demo_items.jsonl"
BENCHMARK_OUTCOMES = ("kept", "translated")

_ITEM_KEYS = ("difficulty", "reasoning_type", "knowledge_domains", "creative_domains", "cultures")
_VIEW_KEYS = ("question", "answer", "explanation", "other_answers")


class NoItemsError(UsageError, ValueError):
    """A spec yielded no item with the requested language view."""


def shipped_path(name: str) -> Path:
    """``<data dir>/name`` (resolved when called), falling back to the project's and the package's
    own ``data/`` (where it ships)."""
    return shipped_data(name)


def in_benchmark(pipeline_outcome: str) -> bool:
    """Whether an item with this pipeline outcome is part of the published benchmark."""
    return pipeline_outcome.strip().lower().startswith(BENCHMARK_OUTCOMES)


def _view(example: dict[str, Any], lang: Lang) -> ItemView | None:
    if not example.get(f"question_{lang}") or not example.get(f"answer_{lang}"):
        return None
    return ItemView(
        question=example[f"question_{lang}"],
        answer=example[f"answer_{lang}"],
        explanation=example.get(f"explanation_{lang}"),
        other_answers=example.get(f"other_answers_{lang}"),
    )


def paper_example_to_item(example: dict[str, Any]) -> Item:
    """One record of ``paper_examples.jsonl`` as an :class:`Item` (see the module docstring)."""
    views = {lang: _view(example, lang) for lang in LANGS}
    used = {"id", "pipeline_outcome", "source", *_ITEM_KEYS}
    used |= {f"{key}_{lang}" for lang, view in views.items() if view for key in _VIEW_KEYS}
    outcome = example.get("pipeline_outcome", "")
    meta = {
        "pipeline_outcome": outcome,
        "source": example.get("source"),
        "in_benchmark": in_benchmark(outcome),
    }
    meta |= {key: value for key, value in example.items() if key not in used}
    return Item(
        id=example["id"],
        difficulty=example.get("difficulty"),
        reasoning_type=example.get("reasoning_type"),
        knowledge_domains=example.get("knowledge_domains") or [],
        creative_domains=example.get("creative_domains") or [],
        cultures=example.get("cultures") or [],
        en=views["en"],
        ru=views["ru"],
        meta=meta,
    )


def build_demo_items(source: str | Path | None = None) -> list[Item]:
    """Items from the paper examples that have an English question and answer, in file order."""
    path = Path(source) if source is not None else shipped_path(DEMO_SOURCE_NAME)
    items = []
    for row in jsonl.read_jsonl(path):
        item = paper_example_to_item(row)
        if item.has("en"):
            items.append(item)
        else:
            log.warning("%s: %s has no English question and answer; not a demo item", path, item.id)
    return items


def items_to_jsonl(items: list[Item]) -> str:
    """The JSONL text of items: one ``model_dump`` per line, UTF-8, fields in model order."""
    return jsonl.dumps_lines(item.model_dump() for item in items)


def write_demo_items(items: list[Item], path: str | Path | None = None) -> Path:
    """Write the demo set (by default to ``data/cresowlve/demo_items.jsonl``)."""
    path = Path(path) if path is not None else data_dir() / DEMO_ITEMS_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    outfiles.write_text(path, items_to_jsonl(items))
    return path


class _FileLines:
    """``file:line`` of each item of a JSON Lines file, by the item's position: the line numbers are
    kept (an array of ints), the texts made only for the item an error names."""

    def __init__(self, path: Path):
        self.path, self.lines = path, array("q")

    def numbered(self, rows: Iterable[tuple[int, dict[str, Any]]]) -> Iterator[tuple[int, dict[str, Any]]]:
        """``rows`` as they are, each one's line number noted as it passes."""
        for lineno, row in rows:
            self.lines.append(lineno)
            yield lineno, row

    def __len__(self) -> int:
        return len(self.lines)

    def __getitem__(self, n: int) -> str:
        return f"{self.path}:{self.lines[n]}"


def _read_jsonl_items(path: Path, lang: Lang) -> tuple[list[Item], _FileLines]:
    """The items of a JSON Lines file, published-schema rows (``question`` at the top level) or one
    ``Item`` per line (the first row decides), and the ``file:line`` of each. Rows are read one at
    a time and each becomes its item at once: the file's rows are never held beside its items."""
    lines = _FileLines(path)  # both readers keep one item per row
    rows = lines.numbered(iter_jsonl_objects(path))
    first = next(rows, None)
    if first is None:
        return [], lines
    published = "question" in first[1]  # Item rows nest it under en/ru
    rest = itertools.chain([first], rows)
    del first
    items = published_items(path, published_jsonl_rows(path, rest), lang) if published else _items_from_rows(path, rest)
    return items, lines


def _items_from_rows(path: Path, rows: Iterable[tuple[int, dict[str, Any]]]) -> list[Item]:
    """``Item`` rows as items. Beyond the model's own validation: the difficulty follows the published
    schema's rule (:func:`~cresowlve_core.sources.hub.difficulty_level`: ``true`` is not level 1, 7
    is no level), a ``reasoning_type`` is ``creative`` or ``factual`` (any case) or null, a row must have
    an ``en`` or ``ru`` view (a published-schema row after an ``Item`` first row, or a misspelt ``"En"``,
    would otherwise read as an item with no question), and a key that is no field of an item or of a
    view is refused (:func:`_unknown_fields`)."""
    items = []
    rows = iter(rows)
    with file_errors_first(rows):
        for lineno, row in rows:
            try:
                difficulty_level(row.get("difficulty"))
            except ValueError as exc:
                raise ItemsFileError(f"{path}:{lineno} (id={row.get('id')!r}): difficulty: {exc}") from None
            try:
                item = Item.model_validate(row)
            except ValidationError as err:
                first = err.errors()[0]
                loc = ".".join(str(x) for x in first["loc"]) or "item"
                more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
                raise ItemsFileError(f"{path}:{lineno} (id={row.get('id')!r}): {loc}: {first['msg']}{more}") from None
            if not item.id.strip():
                raise ItemsFileError(f"{path}:{lineno}: id must be a non-empty string")
            if item.reasoning_type is not None and item.reasoning_type.strip().lower() not in REASONING_TYPES:
                # another word would count a factual item in the creative subset the analysis reports on
                raise ItemsFileError(f"{path}:{lineno} (id={item.id!r}): reasoning_type: must be "
                                     f"{' or '.join(map(repr, REASONING_TYPES))} or null, got {item.reasoning_type!r}")
            if item.en is None and item.ru is None:
                keys = ", ".join(map(repr, list(row)[:5])) + (", ..." if len(row) > 5 else "")
                raise ItemsFileError(
                    f"{path}:{lineno} (id={item.id!r}): no 'en' or 'ru' view (keys: {keys}); an Item row nests its "
                    "question and answer under 'en' or 'ru' (the file's first row is an Item row, so every row is one)")
            if unknown := _unknown_fields(row):
                raise ItemsFileError(
                    f"{path}:{lineno} (id={row.get('id')!r}): unknown field(s) {', '.join(map(repr, unknown))}: an Item "
                    f"row has {', '.join(Item.model_fields)} and each view {', '.join(ItemView.model_fields)}; "
                    "anything else goes under 'meta'")
            items.append(item)
    return items


#: the field names of an item and of a view (pydantic's ``model_fields`` is a property, looked up per access)
_ITEM_FIELDS, _VIEW_FIELDS = frozenset(Item.model_fields), frozenset(ItemView.model_fields)


def _unknown_fields(row: dict[str, Any]) -> list[str]:
    """The keys of an ``Item`` row that are no field of an item or of its ``en``/``ru`` view (a misspelt
    ``other_answer`` would otherwise be dropped, and the accepted answers with it), as ``key`` or ``en.key``."""
    unknown = [key for key in row if key not in _ITEM_FIELDS]
    for lang in LANGS:
        if isinstance(view := row.get(lang), dict):
            unknown += [f"{lang}.{key}" for key in view if key not in _VIEW_FIELDS]
    return unknown


def read_items_jsonl(path: str | Path) -> list[Item]:
    """Items stored one ``Item.model_dump()`` JSON per line.

    Raises :class:`ItemsFileError` naming the file and line for anything that is not such a line
    (see :func:`~cresowlve_core.sources.hub.read_jsonl_objects`).
    """
    path = Path(path)
    return _items_from_rows(path, iter_jsonl_objects(path))


def load_demo_items(include_removed: bool = False) -> list[Item]:
    """The shipped demo items; by default only those in the benchmark (9 of 15)."""
    items = read_items_jsonl(shipped_path(DEMO_ITEMS_NAME))
    return items if include_removed else [it for it in items if it.meta.get("in_benchmark")]


def _invalid_strings(value: Any, where: str = "") -> list[str]:
    """Where in ``value`` (a dumped item) a string cannot be encoded as UTF-8 (lone surrogates)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return [where or "text"]
        return []
    if isinstance(value, dict):
        out = []
        for k, v in value.items():
            out += _invalid_strings(k, f"{where}.{k!r}") if isinstance(k, str) else []
            out += _invalid_strings(v, f"{where}.{k}" if where else str(k))
        return out
    if isinstance(value, (list, tuple)):
        return [w for i, v in enumerate(value) for w in _invalid_strings(v, f"{where}[{i}]")]
    return []


def _all_utf8(dumped: list[dict[str, Any]]) -> bool:
    """Whether every string (keys too) of every dumped item can be encoded as UTF-8: one encoding
    of them all, the quick check before :func:`_invalid_strings` walks each item to say where."""
    try:
        json.dumps(dumped, ensure_ascii=False, default=str).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_CHECK_CHUNK = 1000


def validate_items(items: list[Item], source: str) -> None:
    """Refuse an item set with duplicate ids (also ids that differ only in case, Unicode normalisation or surrounding
    whitespace) or text that is not valid Unicode.

    Raises :class:`ItemsFileError` naming every offending id (the first ten, with a count):
    ``source`` is the spec or file the items came from. Positions are 1-based in file order.
    """
    positions: dict[str, list[int]] = defaultdict(list)
    for n, item in enumerate(items, 1):
        positions[item.id].append(n)
    dupes = {k: v for k, v in positions.items() if len(v) > 1}
    if dupes:
        shown = "; ".join(f"{k!r} (items {', '.join(map(str, v))})" for k, v in list(dupes.items())[:10])
        more = f"; and {len(dupes) - 10} more" if len(dupes) > 10 else ""
        raise ItemsFileError(
            f"{source}: {len(dupes)} duplicate item id(s): {shown}{more}. Ids must be unique "
            "(results are stored by id); remove or rename the repeats"
        )
    # ids that only case, surrounding whitespace or Unicode normalisation (a precomposed "é" against "e" and a
    # combining accent, drawn alike) tell apart
    alike: dict[str, list[str]] = defaultdict(list)
    for item_id in positions:
        alike[unicodedata.normalize("NFC", item_id.strip()).casefold()].append(item_id)
    if groups := [ids for ids in alike.values() if len(ids) > 1]:
        shown = "; ".join(" and ".join(f"{_shown_id(i)} (item {positions[i][0]})" for i in ids) for ids in groups[:10])
        more = f"; and {len(groups) - 10} more" if len(groups) > 10 else ""
        raise ItemsFileError(
            f"{source}: {len(groups)} set(s) of item ids that differ only in case, Unicode normalisation or "
            f"surrounding whitespace: {shown}{more}. To the eye (a report's table, a hand-written filter) they are one id; remove the repeats "
            "or give them distinct ids"
        )
    bad: list[tuple[str, list[str]]] = []
    for start in range(0, len(items), _CHECK_CHUNK):  # a thousand dumps at a time, not all the items twice over
        chunk = items[start:start + _CHECK_CHUNK]
        dumped = [item.model_dump() for item in chunk]
        if not _all_utf8(dumped):
            bad += [(item.id, where) for item, d in zip(chunk, dumped) if (where := _invalid_strings(d))]
    if bad:
        shown = "; ".join(f"id {i!r} ({', '.join(w[:3])})" for i, w in bad[:10])
        more = f"; and {len(bad) - 10} more" if len(bad) > 10 else ""
        raise ItemsFileError(
            f"{source}: {len(bad)} item(s) with text that is not valid Unicode (a lone surrogate "
            f"such as \\udcff, which cannot be sent as UTF-8): {shown}{more}; fix or remove them"
        )


def _shown_id(item_id: str) -> str:
    """An id as an error names it: its repr, with its code points beside it when it is not in NFC (two ids
    that differ only in normalisation look the same in a repr)."""
    if unicodedata.normalize("NFC", item_id) == item_id:
        return repr(item_id)
    return f"{item_id!r} (as code points {ascii(item_id)})"


def check_input_limits(items: list[Item], lang: Lang, wheres: Sequence[str] | _FileLines | None, source: str,
                       max_input_chars: int | None = None) -> None:
    """Refuse an item whose ``lang`` question or answer breaks the input limits of
    :mod:`cresowlve_core.inputs` (empty, a control character, a question above the size limit), or
    whose explanation or accepted alternatives (optional, but sent to the judge with the answer) hold
    a control character.

    ``wheres`` (parallel to ``items``) names each item's ``file:line``; without it the item is
    named by ``source`` and its id. Raises :class:`ItemsFileError` (exit 2) before anything is sent.
    """
    for n, item in enumerate(items):
        view = item.en if lang == "en" else item.ru
        if view is None:
            continue  # not selected for this language
        for field, text, sized in (("question", view.question, True), ("answer", view.answer, False)):
            problem = text_problem(text, f"{lang}.{field}", max_chars=max_input_chars, size_limited=sized)
            if problem is not None:
                where = wheres[n] if wheres is not None else source
                raise ItemsFileError(f"{where} (id={item.id!r}): {problem}")
        for field, optional in (("explanation", view.explanation), ("other_answers", view.other_answers)):
            if optional and optional.strip() and (problem := text_problem(optional, f"{lang}.{field}",
                                                                          size_limited=False)) is not None:
                where = wheres[n] if wheres is not None else source
                raise ItemsFileError(f"{where} (id={item.id!r}): {problem}")


def _users_file(path: Path) -> dict[str, Any]:
    """What a run records of an items file the user brings: no dataset nor revision, the path as given and
    the SHA-256 of its bytes."""
    from cresowlve_core.paths import file_sha256

    return {"repo": None, "revision": None, "path": str(path), "sha256": file_sha256(path)}


def load_items(spec: str, lang: Lang, *, max_input_chars: int | None = None) -> list[Item]:
    """Items with a ``lang`` view from ``spec``.

    ``spec`` is ``"demo"`` (the shipped benchmark demo items), ``"hub:en"`` / ``"hub:ru"`` (the
    published config; ``"hub"`` means ``hub:{lang}``), or a path to a ``.parquet`` or ``.jsonl``
    file: published-schema rows, or one ``Item`` per line. Raises :class:`NoItemsError` if no
    item has the ``lang`` view, and :class:`ItemsFileError` for a file that cannot be read, duplicate
    ids, invalid text (see the module docstring) or an input limit broken (:func:`check_input_limits`;
    ``max_input_chars`` raises the question size limit): all before any request is sent.
    """
    if lang not in LANGS:
        raise InputError(f"lang must be one of {LANGS}, got {lang!r}")
    wheres: _FileLines | None = None  # file:line of each item, where the items come from a JSONL file
    users_file = False  # a file the user brings, not a set the project names (the demo, the hub's configs)
    if spec == "demo":
        items = load_demo_items()
    elif spec == "hub" or spec.startswith("hub:"):
        hub_lang = spec.partition(":")[2] or lang
        if hub_lang not in LANGS:
            raise InputError(f"unknown hub config in {spec!r}; use hub:en or hub:ru")
        if hub_lang != lang:
            raise NoItemsError(f"{spec!r} holds {hub_lang!r} items only; asked for {lang!r}")
        items = load_published(lang)
    else:
        path, users_file = Path(spec), True
        if not path.is_file():
            raise MissingInput(f"{spec!r} is not 'demo', 'hub:en', 'hub:ru' or an existing file")
        if path.suffix == ".jsonl":
            items, wheres = _read_jsonl_items(path, lang)
        elif path.suffix == ".parquet":
            items = read_published_file(path, lang)
        else:
            raise InputError(f"{spec!r}: expected a .jsonl or .parquet file")
    validate_items(items, spec)
    check_input_limits(items, lang, wheres, spec, max_input_chars)
    if users_file:  # the file a run records it read (its manifest's items_files), as a hub snapshot's files
        read = _users_file(Path(spec))
        for item in items:
            item._loaded_from = read
    selected = [item for item in items if item.has(lang)]
    if not selected:
        raise NoItemsError(f"{spec!r} has no items with a {lang!r} view ({len(items)} items in all)")
    # items of a user's file with the other language only: not run, and said so (the shipped demo set is
    # bilingual in part by design, as its overview shows; each hub config holds one language)
    if len(selected) < len(items) and users_file:
        others = [item.id for item in items if not item.has(lang)]
        shown = ", ".join(map(repr, others[:5])) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        log.warning("%s: %d of %d items have no %r view and are not part of this run (%s)",
                    spec, len(others), len(items), lang, shown)
    return selected
