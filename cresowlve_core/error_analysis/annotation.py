"""Manual annotation of error categories: a seeded sample, a per-annotator store, and a panel.

* :func:`annotation_sample` draws a seeded sample of wrong answers per configuration (the paper:
  150 of 1,087 errors of one model, three annotators);
* :class:`AnnotationStore` keeps one JSONL file per annotator, appended and fsynced at every save,
  so a closed notebook loses nothing and the next session resumes at the first item not yet done;
* :func:`annotation_panel` is the ipywidgets panel (``notebooks/annotate_errors.py`` is the marimo
  counterpart); both show the reasoning trace with the question's clue words highlighted.
"""

from __future__ import annotations

import html
import re
import unicodedata
from pathlib import Path
from typing import Any

import pandas as pd

from cresowlve_core import jsonl
from cresowlve_core.discover import SAMPLE
from cresowlve_core.error_analysis.distribution import OTHER
from cresowlve_core.error_analysis.taxonomy import BY_SLUG, SLUGS
from cresowlve_core.extras import require
from cresowlve_core.failures import InputError
from cresowlve_core.runtime import RunDir, now_iso
from cresowlve_core.stats import seeded_rank
from cresowlve_core.text import slug

SAMPLE_COLUMNS = ["key", "config", "lang", "id", "question", "answer", "prediction", "reasoning"]
CHOICES: tuple[str, ...] = (*SLUGS, OTHER)
_WORD = re.compile(r"\w+")
_STOP = frozenset("""this that what which with from have their there they them were been into about
name write these those where when whom whose than then also only such other after before because
этот эта это эти того тому котором который которая которые какой какая какое какие чтобы когда
было были будет если даже потом после перед него неё ними свой своей своих только также
назовите напишите укажите ответьте вопрос""".split())


def annotation_sample(labels: pd.DataFrame, n_per_config: int = 50, seed: int = 0) -> pd.DataFrame:
    """A seeded sample of at most ``n_per_config`` wrong answers per configuration.

    Per configuration, the ``n_per_config`` answers of lowest :func:`~cresowlve_core.stats.seeded_rank` of
    the seed and their key, in key order. An answer's place depends on its key alone, so adding or removing
    other runs or answers (another configuration's, a re-run that turned an answer right) leaves the sample,
    and the annotations saved for it, as they were; only a sampled answer that left is replaced.
    """
    if labels.empty:
        return pd.DataFrame(columns=SAMPLE_COLUMNS)
    parts = []
    for _config, part in sorted(labels.groupby("config"), key=lambda kv: str(kv[0])):
        ranks = part["key"].astype(str).map(lambda key: seeded_rank(seed, "annotation", key))
        parts.append(part.loc[ranks.sort_values(kind="stable").index[:n_per_config]].sort_values("key"))
    return pd.concat(parts, ignore_index=True)[SAMPLE_COLUMNS]


def write_sample(sample: pd.DataFrame, path: str | Path) -> Path:
    """Write the sample as JSONL (for the marimo panel and for later sessions)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return jsonl.write_jsonl(path, sample.to_dict("records"))


def read_sample(path: str | Path) -> pd.DataFrame:
    """The annotation sample :func:`write_sample` wrote; a row without a ``key`` (the item a label is saved
    for) is an :class:`InputError` naming ``file:line``."""
    rows = []
    for lineno, rec in jsonl.read_jsonl_numbered(path, error=InputError, what="sampled answer"):
        if not isinstance(rec.get("key"), str) or not rec["key"].strip():
            raise InputError(f"{path}:{lineno}: a sampled answer needs a 'key' (a non-empty string), got {rec.get('key')!r}")
        rows.append(rec)
    return pd.DataFrame(rows, columns=SAMPLE_COLUMNS)


class AnnotationStore:
    """One annotator's labels in ``<folder>/<annotator>.jsonl``; the last save per item wins."""

    def __init__(self, folder: str | Path, annotator: str):
        name = slug(annotator.strip())
        if not annotator.strip():
            raise InputError("an annotator name is required")
        if f"{name}.jsonl" == SAMPLE_FILE:  # the labels would go into the sample, and the next sample would replace them
            raise InputError(f"the annotator name {annotator.strip()!r} is taken by the annotation sample's file; "
                             "choose another name")
        self.annotator = annotator.strip()
        self.run = RunDir(folder)
        self.filename = f"{name}.jsonl"

    def save(self, key: str, category: str, note: str = "") -> dict[str, Any]:
        """Append one label at once (fsynced). ``category`` is a slug or ``other``."""
        if category not in CHOICES:
            raise InputError(f"unknown category {category!r}; choose one of {', '.join(CHOICES)}")
        rec = {"key": key, "annotator": self.annotator, "category": category, "note": note, "saved_at": now_iso()}
        self.run.append(self.filename, rec)
        return rec

    def labels(self) -> dict[str, dict[str, Any]]:
        """The latest record per item key, read as :func:`read_annotations` reads it (a line it cannot
        use is an :class:`InputError` naming ``file:line``)."""
        path = self.run.path / self.filename
        return _annotator_labels(path) if path.exists() else {}

    def next_index(self, keys: list[str]) -> int:
        """The first position in ``keys`` this annotator has not labelled (``len(keys)`` if all are)."""
        done = self.labels()
        return next((i for i, k in enumerate(keys) if k not in done), len(keys))


#: the annotation sample's file in the annotations folder (every other ``*.jsonl`` there is an annotator's;
#: the apps find the newest one by this name)
SAMPLE_FILE = SAMPLE


def read_annotations(folder: str | Path) -> pd.DataFrame:
    """All annotators' latest labels: columns ``key``, ``annotator``, ``category``, ``note``.

    Every ``*.jsonl`` of ``folder`` but :data:`SAMPLE_FILE` is an annotator's file, read as
    :class:`AnnotationStore` reads it (a torn last line is skipped). A line that is not a JSON
    object, or a record without a ``key`` and an ``annotator`` or with a category outside
    :data:`CHOICES` (a hand edit: the panels save only those), is an :class:`InputError` naming
    ``file:line``, never a label left out of the agreement without a word."""
    rows: list[dict[str, Any]] = []
    folder = Path(folder)
    if folder.is_dir():
        for f in sorted(folder.glob("*.jsonl")):
            if f.name == SAMPLE_FILE:
                continue
            rows.extend(_annotator_labels(f).values())
    return pd.DataFrame(rows, columns=["key", "annotator", "category", "note", "saved_at"])


def _annotator_labels(f: Path) -> dict[str, dict[str, Any]]:
    """The latest label per item key of one annotator's file (the rules of :func:`read_annotations`)."""
    latest: dict[str, dict[str, Any]] = {}
    for lineno, rec in jsonl.iter_jsonl_numbered(f, torn_tail_ok=True, error=InputError, what="label"):
        for field in ("key", "annotator"):
            if not isinstance(rec.get(field), str) or not rec[field].strip():
                raise InputError(f"{f}:{lineno}: an annotation needs a {field!r} (a non-empty string), "
                                 f"got {rec.get(field)!r}")
        if rec.get("category") not in CHOICES:
            raise InputError(f"{f}:{lineno}: unknown category {rec.get('category')!r} for {rec['key']!r}; "
                             f"one of {', '.join(CHOICES)}")
        latest[rec["key"]] = rec
    return latest


def clue_words(question: str) -> set[str]:
    """Content words of the question (4+ letters, not a stop word) and its capitalised
    placeholders (X, IT, ИКС), casefolded."""
    norm = unicodedata.normalize("NFKC", question)
    caps = {w.casefold() for w in _WORD.findall(norm) if w.isalpha() and w.isupper()}
    return caps | {w for w in _WORD.findall(norm.casefold()) if len(w) >= 4 and w not in _STOP and not w.isdigit()}


def highlight(text: str, words: set[str]) -> str:
    """HTML of ``text`` (escaped) with every word in ``words`` wrapped in ``<mark>``."""
    out, last = [], 0
    for m in _WORD.finditer(text):
        out.append(html.escape(text[last:m.start()]))
        w = m.group(0)
        key = unicodedata.normalize("NFKC", w).casefold()
        out.append(f"<mark>{html.escape(w)}</mark>" if key in words else html.escape(w))
        last = m.end()
    out.append(html.escape(text[last:]))
    return "".join(out)


def item_html(row: dict[str, Any]) -> str:
    """One sampled wrong answer as HTML: puzzle, reference, model answer, highlighted reasoning."""
    words = clue_words(str(row.get("question") or ""))
    e = html.escape
    return (
        f"<div style='max-width:60em'><p><b>{e(str(row.get('config')))}</b> · {e(str(row.get('lang')))} · "
        f"<code>{e(str(row.get('id')))}</code></p>"
        f"<p><b>Puzzle.</b> {e(str(row.get('question') or ''))}</p>"
        f"<p><b>Reference answer.</b> {e(str(row.get('answer') or ''))}</p>"
        f"<p><b>Model answer.</b> {e(str(row.get('prediction') or '(empty)'))}</p>"
        "<details open><summary><b>Reasoning</b> (clue words highlighted)</summary>"
        f"<div style='white-space:pre-wrap;max-height:24em;overflow:auto;border:1px solid #ccc;padding:6px'>"
        f"{highlight(str(row.get('reasoning') or '(none recorded)'), words)}</div></details></div>"
    )


def choice_label(c: str) -> str:
    return BY_SLUG[c].name if c in BY_SLUG else "Other (say what in the note)"


def annotation_panel(sample: pd.DataFrame, store: AnnotationStore) -> Any:
    """An ipywidgets panel over ``sample`` for one annotator; every save is written at once."""
    w = require("ipywidgets", "ui", "the annotation panel")

    rows = sample.to_dict("records")
    keys = [str(r["key"]) for r in rows]
    state = {"i": store.next_index(keys)}
    status = w.HTML()
    body = w.HTML()
    choice = w.RadioButtons(options=[(choice_label(c), c) for c in CHOICES], value=None,
                            layout=w.Layout(width="max-content"))
    note = w.Textarea(placeholder="note (optional)", layout=w.Layout(width="40em"))
    prev_b, save_b = w.Button(description="◀ previous"), w.Button(description="save and next ▶", button_style="primary")

    def show() -> None:
        done = store.labels()
        i = state["i"]
        status.value = f"<b>{html.escape(store.annotator)}</b>: {len([k for k in keys if k in done])} of {len(keys)} labelled"
        if i >= len(rows):
            body.value = "<p>All items in the sample are labelled. Thank you.</p>"
            return
        body.value = f"<p>Item {i + 1} of {len(rows)}</p>" + item_html(rows[i])
        old = done.get(keys[i])
        choice.value = old["category"] if old else None
        note.value = old.get("note", "") if old else ""

    def on_save(_: Any) -> None:
        if state["i"] < len(rows) and choice.value is not None:
            store.save(keys[state["i"]], choice.value, note.value)
            state["i"] += 1
        show()

    def on_prev(_: Any) -> None:
        state["i"] = max(0, state["i"] - 1)
        show()

    save_b.on_click(on_save)
    prev_b.on_click(on_prev)
    show()
    return w.VBox([status, body, choice, note, w.HBox([prev_b, save_b])])
