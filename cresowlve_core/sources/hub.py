"""The published CresOWLve dataset (Hugging Face hub ``mismayil/cresowlve``) as :class:`Item` records.

The dataset has two configs, ``en`` and ``ru``, each with a ``test`` split of 2,061 rows in the
schema of :data:`~cresowlve_core.items.PUBLISHED_FIELDS`. One row becomes one single-language
:class:`Item`.

Downloads go to ``CACHE_DIR / "hub"`` through ``huggingface_hub``. A cached snapshot is used
without touching the network; with ``HF_HUB_OFFLINE=1`` a missing snapshot is an error instead of
a download.

Rows are validated strictly: a missing column, or a row whose field is missing or of the wrong
type, raises :class:`PublishedDataError` naming the file, row, id and field. No row is dropped.
JSON Lines files are read by :func:`read_jsonl_objects`, which accepts a UTF-8 BOM and turns
every other problem (not UTF-8, a JSON array, a line that is not JSON or not an object) into an
:class:`ItemsFileError` naming the file and line.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

import yaml

from cresowlve_core import jsonl
from cresowlve_core.failures import InputError, MissingInput, UsageError
from cresowlve_core.items import PUBLISHED_FIELDS, Item, ItemView, Lang
from cresowlve_core.paths import cache_dir as _cache_dir
from cresowlve_core.paths import file_sha256

log = logging.getLogger(__name__)

REPO_ID = "mismayil/cresowlve"
DATA_SUFFIXES = (".parquet", ".jsonl")
_ALLOW_PATTERNS = ["*.parquet", "*.jsonl", "README.md"]

_TEXT_FIELDS = ("id", "question", "answer")
_OPTIONAL_TEXT_FIELDS = ("explanation", "other_answers")
_LIST_FIELDS = ("knowledge_domains", "creative_domains", "cultures")

def published_schema() -> Any:
    """The Arrow schema of the published files (pyarrow is imported here, when a Parquet file is
    read or written: reading JSON Lines items does not load it, about 60 MiB)."""
    import pyarrow as pa

    return pa.schema(
        [
            ("id", pa.string()),
            ("question", pa.string()),
            ("answer", pa.string()),
            ("difficulty", pa.int64()),
            ("explanation", pa.string()),
            ("other_answers", pa.string()),
            ("knowledge_domains", pa.list_(pa.string())),
            ("creative_domains", pa.list_(pa.string())),
            ("cultures", pa.list_(pa.string())),
        ]
    )


class ItemsFileError(UsageError, ValueError):
    """An items file cannot be read; the message names the file and, where one applies, the line."""


class PublishedDataError(ItemsFileError):
    """A published-schema file is missing a column or has an invalid row."""


class HubUnavailableError(UsageError, RuntimeError):
    """The dataset is not cached and the hub may not (or could not) be reached."""


#: How to run without the hub, appended to every :class:`HubUnavailableError`.
LOCAL_FILE_HINT = (
    "to run offline, pass a local file instead: --items PATH.parquet or PATH.jsonl "
    "(published schema), or --items demo"
)


def read_jsonl_objects(path: str | Path) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every non-blank line of a JSON Lines file.

    A UTF-8 byte-order mark is accepted. Raises :class:`ItemsFileError` naming the file and line
    for bytes that are not UTF-8, a JSON array (``[...]``) instead of one object per line, a
    line that is not JSON, or a line that is JSON but not an object (``42``, ``null``, a list).
    Lines are split on ``\n`` only, so a raw U+2028 inside a JSON string is kept.
    """
    return list(iter_jsonl_objects(path))


def iter_jsonl_objects(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """:func:`read_jsonl_objects` one line at a time (the same rules and errors; a JSON array is
    refused before the first object): a reader that makes items of the rows holds one row at a time."""
    path = Path(path)
    if _first_text(path).startswith("["):
        raise ItemsFileError(
            f"{path}: a JSON array, not JSON Lines; write one JSON object per line "
            f"(e.g. jq -c '.[]' {path.name} > items.jsonl)"
        )
    yield from jsonl.iter_jsonl_numbered(path, error=ItemsFileError, what="item")


@contextlib.contextmanager
def file_errors_first(rows: Iterator[Any]) -> Iterator[None]:
    """Around a loop that makes items of ``rows`` one at a time: when a row is refused, the rest of
    the file is still read (and dropped), so that a line further on that is not JSON or not an object
    is the error named, as when the whole file was read before its first item was made."""
    try:
        yield
    except ItemsFileError:
        for _ in rows:  # raises the file's own error, if it has one
            pass
        raise


def _first_text(path: Path) -> str:
    """The file's first non-blank line, stripped (a byte-order mark and undecodable bytes aside)."""
    with path.open("rb") as f:
        for raw in f:
            line = raw.decode("utf-8", "replace").lstrip("\ufeff").strip()
            if line:
                return line
    return ""


# ---------------------------------------------------------------------------------------------
# Reading and writing files in the published schema
# ---------------------------------------------------------------------------------------------


def _is_null(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def difficulty_level(value: Any) -> int | None:
    """An item's difficulty as read from a file: an integer 1-5 (an integral float such as ``3.0``,
    as pandas writes it, counts), or None for null or NaN; anything else (``true``, ``"3"``, ``7``)
    raises ``ValueError`` saying what was found. One rule for published rows and ``Item`` rows."""
    if _is_null(value):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 5:
        raise ValueError(f"must be an integer 1-5 or null, got {value!r}")
    return value


def _row_to_item(row: dict[str, Any], lang: Lang, where: str) -> Item:
    """Validate one published row and turn it into an :class:`Item` with a ``lang`` view."""
    row_id = row.get("id")

    def fail(name: str, problem: str) -> PublishedDataError:
        return PublishedDataError(f"{where} (id={row_id!r}): field {name!r} {problem}")

    for name in _TEXT_FIELDS:
        value = row.get(name)
        if not isinstance(value, str) or not value.strip():
            raise fail(name, f"must be a non-empty string, got {value!r}")
    for name in _OPTIONAL_TEXT_FIELDS:
        value = row.get(name)
        if not _is_null(value) and not isinstance(value, str):
            raise fail(name, f"must be a string or null, got {value!r}")
    try:
        difficulty = difficulty_level(row.get("difficulty"))
    except ValueError as exc:
        raise fail("difficulty", str(exc)) from None
    lists: dict[str, list[str]] = {}
    for name in _LIST_FIELDS:
        value = row.get(name)
        if value is not None and hasattr(value, "tolist"):  # numpy arrays from pandas
            value = value.tolist()
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise fail(name, f"must be a list of strings, got {value!r}")
        lists[name] = value
    view = ItemView(
        question=row["question"],
        answer=row["answer"],
        explanation=None if _is_null(row.get("explanation")) else row["explanation"],
        other_answers=None if _is_null(row.get("other_answers")) else row["other_answers"],
    )
    return Item(
        id=row["id"],
        difficulty=difficulty,
        knowledge_domains=lists["knowledge_domains"],
        creative_domains=lists["creative_domains"],
        cultures=lists["cultures"],
        en=view if lang == "en" else None,
        ru=view if lang == "ru" else None,
    )


def _read_rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(where, row)`` pairs; ``where`` names the file and row (and line, for JSON Lines). The rows
    of a JSON Lines file are read one at a time."""
    if path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except (pa.ArrowException, OSError) as err:
            first = str(err).splitlines()[0] if str(err) else type(err).__name__
            raise PublishedDataError(f"{path}: not a readable Parquet file ({first})") from None
        missing = [c for c in PUBLISHED_FIELDS if c not in table.column_names]
        if missing:
            raise PublishedDataError(f"{path}: missing column(s) {missing}")
        for i, row in enumerate(table.to_pylist()):
            yield f"{path}: row {i}", row
    elif path.suffix == ".jsonl":
        yield from published_jsonl_rows(path, iter_jsonl_objects(path))
    else:
        raise PublishedDataError(f"{path}: expected a .parquet or .jsonl file")


def published_jsonl_rows(path: Path, numbered: Iterable[tuple[int, dict[str, Any]]]
                         ) -> Iterator[tuple[str, dict[str, Any]]]:
    """The ``(where, row)`` pairs of a published-schema JSON Lines file from its ``(line number, row)``
    pairs (:func:`iter_jsonl_objects`)."""
    for i, (lineno, row) in enumerate(numbered):
        yield f"{path}:{lineno}: row {i}", row


def read_published_file(path: str | Path, lang: Lang) -> list[Item]:
    """Read a .parquet or .jsonl file in the published schema as ``lang`` items.

    Raises :class:`PublishedDataError` for a missing column or an invalid row (the message names
    the row number, its id and the field). Extra columns are ignored with a log message.
    """
    path = Path(path)
    return published_items(path, _read_rows(path), lang)


def published_items(path: Path, rows: Iterable[tuple[str, dict[str, Any]]], lang: Lang) -> list[Item]:
    """The ``lang`` items of published-schema ``(where, row)`` pairs (:func:`read_published_file`),
    taken one at a time: each row may be dropped once its item is made."""
    items: list[Item] = []
    extra: set[str] = set()
    rows = iter(rows)
    with file_errors_first(rows):
        for where, row in rows:
            for name in PUBLISHED_FIELDS:
                if name not in row:
                    raise PublishedDataError(f"{where} (id={row.get('id')!r}): field {name!r} is missing")
            extra |= set(row) - set(PUBLISHED_FIELDS)
            items.append(_row_to_item(row, lang, where))
    if extra:
        log.info("%s: ignoring extra column(s) %s", path, sorted(extra))
    return items


def write_published_file(items: Iterable[Item], path: str | Path, lang: Lang) -> Path:
    """Write items' ``lang`` views in the published schema (.parquet or .jsonl, by extension).

    Every item must have a ``lang`` view; a missing one raises ``KeyError`` naming the item.
    """
    path = Path(path)
    rows = [item.published_row(lang) for item in items]
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows, schema=published_schema()), path)
    elif path.suffix == ".jsonl":
        jsonl.write_jsonl(path, rows)
    else:
        raise InputError(f"{path}: expected a .parquet or .jsonl file")
    return path


# ---------------------------------------------------------------------------------------------
# Finding a config's split inside a downloaded snapshot
# ---------------------------------------------------------------------------------------------


def _card_data_files(root: Path, lang: str, split: str) -> list[str] | None:
    """Path patterns of ``lang``/``split`` declared in the dataset card's ``configs`` section, or None
    when the card declares no ``configs`` (no card, no YAML front matter, or none in it).

    The card is UTF-8, a byte-order mark accepted; other bytes raise :class:`PublishedDataError`
    naming the card and line, as does a front matter that is not YAML. A card that declares
    ``configs`` but not config ``lang`` or its split ``split`` raises :class:`MissingInput`: the
    declared configs are the dataset's file list, never replaced by a guess from the folder layout.
    """
    card = root / "README.md"
    if not card.is_file():
        return None
    text = jsonl.read_text(card, error=PublishedDataError)
    if not text.startswith("---"):
        return None
    try:
        meta = yaml.safe_load(text.split("---", 2)[1])
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise PublishedDataError(f"{card}{line}: the front matter is not valid YAML ({problem}); fix the card") from None
    configs = meta.get("configs") if isinstance(meta, dict) else None
    if not isinstance(configs, list) or not configs:
        return None
    names = [c.get("config_name") for c in configs if isinstance(c, dict)]
    for config in configs:
        if not isinstance(config, dict) or config.get("config_name") != lang:
            continue
        by_split = _split_patterns(config.get("data_files"))
        if not by_split.get(split):
            raise MissingInput(f"{card}: config {lang!r} declares no files for split {split!r} "
                               f"(its splits: {list(by_split)})")
        return by_split[split]
    raise MissingInput(f"{card}: declares configs {names}, not {lang!r}")


#: the split of a config whose ``data_files`` name no split (a pattern or a list of them), as the hub reads it
DEFAULT_CARD_SPLIT = "train"


def _split_patterns(data_files: Any) -> dict[str, list[Any]]:
    """A config's ``data_files`` as ``{split: patterns}``, in the forms the hub reads: a list of
    ``{split, path}`` entries, a ``{split: path}`` mapping, or a pattern or list of patterns, which
    are the ``train`` split's (:data:`DEFAULT_CARD_SPLIT`), not every split's."""
    def listed(path: Any) -> list[Any]:
        return list(path) if isinstance(path, list) else [path]

    if isinstance(data_files, dict):
        return {str(name): listed(path) for name, path in data_files.items()}
    if isinstance(data_files, list) and any(isinstance(entry, dict) for entry in data_files):
        by_split: dict[str, list[Any]] = {}
        for entry in data_files:
            if isinstance(entry, dict):
                by_split.setdefault(str(entry.get("split")), []).extend(listed(entry.get("path")))
        return by_split
    if data_files is None:
        return {}
    return {DEFAULT_CARD_SPLIT: listed(data_files)}


def _card_pattern_problem(pattern: object) -> str | None:
    """Why a data-file pattern of the dataset card cannot name files of the snapshot, or None: it
    must be a non-empty string, relative to the snapshot and without ``..`` (a card is untrusted
    text, and the files it names are read as the dataset)."""
    if not isinstance(pattern, str) or not pattern.strip():
        return "is not a file pattern"
    if PurePosixPath(pattern).is_absolute() or PureWindowsPath(pattern).anchor:
        return "is absolute; it must be relative to the snapshot"
    if ".." in PurePosixPath(pattern.replace("\\", "/")).parts:
        return "leaves the snapshot ('..'); it must name files inside it"
    return None


def find_split_files(root: str | Path, lang: str, split: str = "test") -> list[Path]:
    """Data files of config ``lang``, split ``split`` under a snapshot directory.

    Uses the dataset card's ``configs`` when it declares them (a declared pattern that matches no file
    raises :class:`MissingInput` naming it), else the usual layouts (``{lang}/{split}-*.parquet``,
    ``data/{lang}/...``, ``{lang}/{split}/...``).
    """
    root = Path(root)
    files: list[Path] = []
    patterns = _card_data_files(root, lang, split)
    if patterns is not None:
        for pattern in patterns:
            if (problem := _card_pattern_problem(pattern)) is not None:
                raise PublishedDataError(f"{root / 'README.md'}: config {lang!r} split {split!r} path {pattern!r} {problem}")
            matched = [p for p in root.glob(pattern) if _data_file_entry(p)]
            if not matched:
                raise MissingInput(f"{root / 'README.md'}: config {lang!r} split {split!r} names {pattern!r}, "
                                   f"which matches no file under {root}")
            files += matched
    else:
        for path in sorted(root.rglob("*")):
            if path.suffix not in DATA_SUFFIXES or not _data_file_entry(path):
                continue
            parts = path.relative_to(root).parts
            if lang in parts[:-1] and (path.name.startswith(split) or split in parts[:-1]):
                files.append(path)
    files = sorted(set(files))
    if not files:
        present = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
        raise MissingInput(f"no {lang}/{split} data files under {root}; files: {present}")
    if (gap := _incomplete_split(files)) is not None:
        raise MissingInput(f"{gap}: the {lang}/{split} files under {root} are incomplete (an interrupted "
                           "download or a deleted cache file?); delete the snapshot to download it again, "
                           "or restore the file")
    return files


#: a shard as the hub writes a split, e.g. ``test-00000-of-00002``
_SHARD = re.compile(r"(?P<series>.+)-(?P<index>\d{5})-of-(?P<total>\d{5})")


def _data_file_entry(path: Path) -> bool:
    """A file, or a link to one that is gone (a snapshot's files link to the cache's blobs): counted among
    a split's files so that a missing one is named, never skipped."""
    return path.is_file() or (path.is_symlink() and not path.exists())


def _incomplete_split(files: list[Path]) -> str | None:
    """What a split's files show to be missing, or None: a link whose target is gone, or a shard of a
    ``NAME-NNNNN-of-MMMMM`` series that is not there."""
    for path in files:
        if not path.exists():
            return f"{path} links to {os.readlink(path)}, which is missing"
    series: dict[tuple[Path, str, str, int], set[int]] = {}
    for path in files:
        if (m := _SHARD.fullmatch(path.stem)) is not None:
            key = (path.parent, m["series"], path.suffix, int(m["total"]))
            series.setdefault(key, set()).add(int(m["index"]))
    for (parent, name, suffix, total), present in sorted(series.items()):
        if missing := sorted(set(range(total)) - present):
            shown = ", ".join(f"{name}-{i:05d}-of-{total:05d}{suffix}" for i in missing[:3])
            more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
            return f"{parent}: {len(missing)} of {total} shards missing ({shown}{more})"
    return None


# ---------------------------------------------------------------------------------------------
# Download and load
# ---------------------------------------------------------------------------------------------


def _hub_offline() -> bool:
    value = os.environ.get("HF_HUB_OFFLINE", "")
    return value.strip().upper() in {"1", "ON", "YES", "TRUE"}


def snapshot_download(**kwargs: Any) -> str:
    """``huggingface_hub.snapshot_download``, imported when the hub is used: reading a local items file
    does not load huggingface_hub (about 0.4 s of CPU with httpx)."""
    from huggingface_hub import snapshot_download as download

    return str(download(**kwargs))


def download_snapshot(cache_dir: str | Path | None = None, *, offline_hint: str = LOCAL_FILE_HINT) -> Path:
    """Local directory of the dataset snapshot; downloads only if nothing is cached.

    Tries the cache first (``local_files_only=True``). On a miss it downloads, unless
    ``HF_HUB_OFFLINE`` is set, in which case :class:`HubUnavailableError` is raised; its message
    ends with ``offline_hint``, how the calling command runs from a local file instead.
    """
    cache = Path(cache_dir) if cache_dir is not None else _cache_dir() / "hub"

    def snapshot(local_files_only: bool) -> Path:
        path = snapshot_download(
            repo_id=REPO_ID,
            repo_type="dataset",
            cache_dir=cache,
            allow_patterns=_ALLOW_PATTERNS,
            local_files_only=local_files_only,
        )
        return Path(path)

    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return snapshot(local_files_only=True)
    except LocalEntryNotFoundError:
        if _hub_offline():
            raise HubUnavailableError(
                f"{REPO_ID} is not cached in {cache} and HF_HUB_OFFLINE is set, so it cannot be "
                f"downloaded from the Hugging Face hub; unset HF_HUB_OFFLINE once to download, or {offline_hint}"
            ) from None
    except Exception as err:  # a corrupt cache or an unreachable hub while looking it up
        log.debug("cache lookup for %s failed: %r", REPO_ID, err)
    log.info("downloading %s from the Hugging Face hub to %s", REPO_ID, cache)
    try:
        return snapshot(local_files_only=False)
    except Exception as err:  # network errors come in many types; one line, not a traceback
        first = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
        raise HubUnavailableError(
            f"could not download {REPO_ID} from the Hugging Face hub ({type(err).__name__}: {first}); "
            f"{offline_hint}"
        ) from err


def load_published(
    lang: Lang,
    split: str = "test",
    *,
    cache_dir: str | Path | None = None,
    local_path: str | Path | None = None,
    offline_hint: str = LOCAL_FILE_HINT,
) -> list[Item]:
    """Items of the published ``lang`` config and ``split``.

    ``local_path`` may be a data file (.parquet/.jsonl, read as is) or a snapshot directory;
    either way the hub is not contacted. Otherwise the snapshot is taken from the cache or
    downloaded (see :func:`download_snapshot`; ``offline_hint`` ends its error). An id that a
    snapshot's split holds twice (in one file or two) raises :class:`PublishedDataError` naming both rows.
    """
    if lang not in ("en", "ru"):
        raise InputError(f"lang must be 'en' or 'ru', got {lang!r}")
    if local_path is not None and Path(local_path).is_file():
        return read_published_file(local_path, lang)
    root = Path(local_path) if local_path is not None else download_snapshot(cache_dir, offline_hint=offline_hint)
    items: list[Item] = []
    first_row: dict[str, str] = {}  # item id -> "file: row n" where the split first holds it
    for path in find_split_files(root, lang, split):
        loaded_from = _snapshot_file(root, path)
        for row, item in enumerate(read_published_file(path, lang)):
            where = f"{path}: row {row}"
            if item.id in first_row:
                raise PublishedDataError(f"{where} (id={item.id!r}): the id repeats {first_row[item.id]}; "
                                         f"a split holds each item once")
            first_row[item.id] = where
            item._loaded_from = loaded_from
            items.append(item)
    return items


def _snapshot_file(root: Path, path: Path) -> dict[str, Any]:
    """What a run records of one data file of a snapshot: the dataset, the snapshot's revision (the
    commit of a hub cache's ``snapshots/<commit>`` folder; None for another folder), the file's path
    in the snapshot and the SHA-256 of its bytes."""
    digest = file_sha256(path)
    revision = root.name if root.parent.name == "snapshots" else None
    return {"repo": REPO_ID, "revision": revision, "path": path.relative_to(root).as_posix(), "sha256": digest}


def loaded_files(items: Iterable[Item]) -> list[dict[str, Any]]:
    """The snapshot files ``items`` were read from by :func:`load_published`, or the user's items file
    (:func:`~cresowlve_core.sources.sample.load_items`), each once, in order (none for the demo items), with
    the number of items each gave."""
    files: dict[str, dict[str, Any]] = {}
    for item in items:
        source = item._loaded_from
        if source is not None:
            entry = files.setdefault(source["sha256"] + source["path"], {**source, "n_items": 0})
            entry["n_items"] += 1
    return list(files.values())


def items_files_differ(recorded: Any, items: Iterable[Item]) -> str | None:
    """What differs between the items files a run recorded (its manifest's ``items_files``: hub snapshot
    files or the user's file) and those ``items`` were read from now: a file the run did not read (another
    revision of the snapshot, or bytes of another SHA-256 under the same path), said in one clause; None
    when each file read now is one the run read, or when the run recorded none (the demo items, or a run
    written before manifests named the files)."""
    if not isinstance(recorded, list) or not recorded:
        return None
    known = {(f.get("path"), f.get("sha256")) for f in recorded if isinstance(f, dict)}
    for now in loaded_files(items):
        if (now["path"], now["sha256"]) not in known:
            then = next((f for f in recorded if isinstance(f, dict) and f.get("path") == now["path"]), None)
            was = _file_version(then) if then else "not a file the run read"
            return f"{now['path']} is now {_file_version(now)} (the run read {was})"
    return None


def _file_version(f: dict[str, Any]) -> str:
    """``revision aaaa1111, SHA-256 000000000000…`` (a hub file), or ``SHA-256 …`` (the user's file)."""
    revision = f"revision {f.get('revision')}, " if f.get("revision") else ""
    return f"{revision}SHA-256 {str(f.get('sha256'))[:12]}…"
