"""The review panel for JupyterLab (ipywidgets), on :mod:`cresowlve_core.construction.review`.

Two modes, one panel:

- ``review_panel(build_dir, reviewer)`` (human validation) shows the next undecided item:
  Russian and English side by side, the filters' verdicts and reasons, the flags; the English
  fields are editable (saved with ``fix_translation``). Each button saves the decision at once and
  moves on; reopening the panel resumes where the reviewer stopped.
- ``review_panel(build_dir, reviewer, mode="agreement")`` (App. B) shows the next item of the
  seeded agreement sample that the reviewer has not labelled, without the model's labels, and
  asks for reasoning type, creative concepts, knowledge domains and cultures; "save" writes them at
  once to ``annotations__<reviewer>.jsonl`` and moves on, resuming likewise.

The HTML of a card (:func:`card_html`) is shared with the marimo app (``notebooks/review.py``).
Cards without a Russian view (synthetic puzzles, see :mod:`cresowlve_core.synthetic.export`)
show their synthetic evidence instead.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from cresowlve_core.banners import banner_html
from cresowlve_core.construction import review as R
from cresowlve_core.construction.vocab import CONCEPTS, DOMAIN_GROUPS, REASONING_TYPES
from cresowlve_core.extras import require
from cresowlve_core.failures import InputError
from cresowlve_core.untrusted import html_text

MODES = ("validation", "agreement")


_esc = html_text  # every value shown here comes from a run directory or an item file


def _view(v: dict | None, title: str, missing: str) -> str:
    if not v:
        return f"<div style='flex:1;padding:0 8px'><h4>{title}</h4><i>{missing}</i></div>"
    rows = "".join(f"<p><b>{k}</b>: {_esc(v.get(k))}</p>" for k in R.EDITABLE_FIELDS if v.get(k))
    return f"<div style='flex:1;padding:0 8px'><h4>{title}</h4>{rows}</div>"


def synthetic_html(syn: dict[str, Any]) -> str:
    """The evidence of a synthetic puzzle's card: literal version, source triples, solver answers."""
    triples = "".join(f"<li>{_esc(' — '.join(str(x) for x in t))}</li>" for t in syn.get("source_triples") or [])
    solver = "".join(f"<li>{_esc(side)}: {_esc(s.get('answer'))} (correct: {_esc(s.get('correct'))}; "
                     f"{_esc(s.get('basis'))})</li>" for side, s in (syn.get("solver") or {}).items())
    return (f"<div><h4>Synthetic puzzle</h4><p><b>literal question</b>: {_esc(syn.get('literal_question'))}</p>"
            f"<p><b>difficulty score</b>: {_esc(syn.get('difficulty_score'))}; <b>creative leap</b>: "
            f"{_esc(syn.get('creative_leap'))}</p><p><b>source triples</b></p><ul>{triples}</ul>"
            f"<p><b>solver</b></p><ul>{solver}</ul></div>")


def card_html(card: dict[str, Any], *, verdicts: bool = True) -> str:
    """One review card as HTML (pure; shared with the marimo app). ``verdicts=False`` leaves out
    the filters' verdicts and flags (the agreement mode shows the puzzle only)."""
    synthetic = card.get("synthetic")
    ru_missing = "no Russian view (synthetic puzzle)" if synthetic else "no Russian view"
    parts = [f"<div><b>{_esc(card['id'])}</b> (difficulty {_esc(card.get('difficulty') or 'unrated')})",
             f"<div style='display:flex'>{_view(card.get('ru'), 'Russian', ru_missing)}"
             f"{_view(card.get('en'), 'English', 'no translation')}</div>"]
    if verdicts:
        nm = card.get("needs_material") or {}
        rs = card.get("russian_specific") or {}
        flags = [*(card.get("review_flags") or []), *(f"parser:{f}" for f in card.get("parser_flags") or [])]
        parts.append(f"<p><b>Needs material</b>: LLM {_esc(nm.get('llm'))} — {_esc(nm.get('reason'))}; pre-check: "
                     f"{_esc(', '.join(nm.get('precheck') or []) or 'no markers')}</p>"
                     f"<p><b>Russian-specific</b>: LLM {_esc(rs.get('llm'))} — {_esc(rs.get('reason'))}</p>"
                     f"<p><b>Flags</b>: {_esc(', '.join(flags) or 'none')}</p>")
        if synthetic:
            parts.append(synthetic_html(synthetic))
    parts.append("</div>")
    return "".join(parts)


def review_panel(build_dir: str | Path, reviewer: str, assigned: list[str] | None = None,
                 mode: str = "validation") -> Any:
    """The ipywidgets panel (see the module docstring); returns the widget to display.
    ``mode``: ``"validation"`` (decisions) or ``"agreement"`` (labelling the agreement sample)."""
    if mode not in MODES:
        raise InputError(f"unknown mode {mode!r}; one of {', '.join(MODES)}")
    if mode == "agreement":
        if assigned is not None:
            raise InputError("the agreement sample is labelled whole by every reviewer; do not pass `assigned`")
        panel = AnnotationForm(R.AnnotationSession(build_dir, reviewer)).box
    else:
        panel = _validation_panel(build_dir, reviewer, assigned)
    banner = embedded_banner_html(build_dir)
    if not banner:
        return panel
    W = require("ipywidgets", "ui", "the review panel")
    return W.VBox([W.HTML(banner), panel])


def embedded_banner_html(build_dir: str | Path) -> str:
    """The embedded-model banner above the cards of a build made on the 270M base model (its
    verdicts, translations and labels are junk), else an empty string; shared with the marimo app."""
    models = R.embedded_models(build_dir)
    if not models:
        return ""
    return banner_html("embedded", f"The model steps of this build ran on {', '.join(models)}.")


def annotation_panel(build_dir: str | Path, reviewer: str) -> Any:
    """The agreement mode of :func:`review_panel`."""
    return review_panel(build_dir, reviewer, mode="agreement")


def _validation_panel(build_dir: str | Path, reviewer: str, assigned: list[str] | None) -> Any:
    W = require("ipywidgets", "ui", "the review panel")

    session = R.ReviewSession(build_dir, reviewer, assigned=assigned)
    head, body, status = W.HTML(), W.HTML(), W.HTML()
    edits = {f: W.Textarea(description=f, layout=W.Layout(width="95%")) for f in R.EDITABLE_FIELDS}
    note = W.Text(description="note", layout=W.Layout(width="95%"))
    buttons = {code: W.Button(description=code.replace("_", " "), tooltip=text)
               for code, text in R.DECISIONS.items()}
    state: dict[str, Any] = {}

    def show() -> None:
        done, total = session.progress()
        head.value = f"<b>{html.escape(reviewer)}</b>: {done} / {total} decided"
        card = session.next_card()
        state["card"] = card
        if card is None:
            body.value = "<b>All items decided.</b> Run the build again to apply the decisions."
            return
        body.value = card_html(card)
        for f, w in edits.items():
            w.value = (card["en"] or {}).get(f) or ""
        note.value = ""

    def click(code: str) -> Any:
        def handler(_: Any) -> None:
            card = state.get("card")
            if card is None:
                return
            fixes = None
            if code == "fix_translation":
                old = card["en"] or {}
                fixes = {f: w.value for f, w in edits.items() if (w.value or "") != (old.get(f) or "")}
            try:
                session.decide(card["id"], code, note=note.value, fixes=fixes)
                status.value = f"saved {html.escape(code)} for {html.escape(str(card['id']))}"
            except R.ReviewError as exc:
                status.value = f"<span style='color:#b00020'>{html.escape(str(exc))}</span>"
                return
            show()
        return handler

    for code, b in buttons.items():
        b.on_click(click(code))
    show()
    return W.VBox([head, body, W.VBox(list(edits.values())), note, W.HBox(list(buttons.values())), status])


class AnnotationForm:
    """The agreement mode's widgets over an :class:`~cresowlve_core.construction.review.AnnotationSession`:
    one sampled item, reasoning type (radio), the 16 concepts and the 34 domain groups (check
    boxes), cultures (comma-separated text). :attr:`box` is the widget to display; :meth:`save`
    is what the save button does."""

    def __init__(self, session: R.AnnotationSession):
        W = require("ipywidgets", "ui", "the review panel")

        self.session = session
        self.head, self.body, self.status = W.HTML(), W.HTML(), W.HTML()
        self.reasoning = W.RadioButtons(options=list(REASONING_TYPES), value=None, description="reasoning")
        self.concepts = {c: W.Checkbox(description=c, indent=False) for c in CONCEPTS}
        self.domains = {d: W.Checkbox(description=d, indent=False) for d in DOMAIN_GROUPS}
        self.cultures = W.Text(description="cultures", placeholder="comma-separated, e.g. russian, french",
                               layout=W.Layout(width="95%"))
        self.button = W.Button(description="save", button_style="primary")
        self.button.on_click(lambda _: self.save())
        grid = W.Layout(grid_template_columns="repeat(4, 25%)")
        self.box = W.VBox([
            self.head, self.body, self.reasoning,
            W.HTML("<b>Creative concepts</b>"), W.GridBox(list(self.concepts.values()), layout=grid),
            W.HTML("<b>Knowledge domains</b>"), W.GridBox(list(self.domains.values()), layout=grid),
            self.cultures, self.button, self.status])
        self.card: dict[str, Any] | None = None
        self.show()

    def show(self) -> None:
        """Show the next unlabelled item and clear the form."""
        done, total = self.session.progress()
        self.head.value = (f"<b>{html.escape(self.session.reviewer)}</b>: agreement sample, "
                           f"{done} / {total} annotated")
        self.card = self.session.next_card()
        self.button.disabled = self.card is None
        if self.card is None:
            self.body.value = "<b>All sampled items annotated.</b> Run the build again to score the agreement."
            return
        self.body.value = card_html(self.card, verdicts=False)
        self.reasoning.value = None
        for w in [*self.concepts.values(), *self.domains.values()]:
            w.value = False
        self.cultures.value = ""

    def save(self) -> R.Annotation | None:
        """Save the form for the shown item (at once), then show the next; a validation error is
        shown and nothing is saved."""
        if self.card is None:
            return None
        try:
            a = self.session.annotate_form(
                self.card["id"], reasoning_type=self.reasoning.value,
                concepts=[c for c, w in self.concepts.items() if w.value],
                domains=[d for d, w in self.domains.items() if w.value], cultures=self.cultures.value)
        except R.ReviewError as exc:
            self.status.value = f"<span style='color:#b00020'>{html.escape(str(exc))}</span>"
            return None
        self.status.value = f"saved annotation of {html.escape(a.item_id)}"
        self.show()
        return a
