"""The human-validation panel for JupyterLab (ipywidgets), on :mod:`cresowlve_core.construction.review`.

``review_panel(build_dir, reviewer)`` shows the next undecided item: Russian and English side
by side, the filters' verdicts and reasons, the flags; the English fields are editable (saved
with ``fix_translation``). Each button saves the decision at once and moves on; reopening the
panel resumes where the reviewer stopped.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from cresowlve_core.construction import review as R


def card_html(card: dict[str, Any]) -> str:
    """One review card as HTML (pure; shared with the marimo app)."""
    def esc(x: Any) -> str:
        return html.escape("" if x is None else str(x))

    def view(v: dict | None, title: str) -> str:
        if not v:
            return f"<div style='flex:1'><h4>{title}</h4><i>no translation</i></div>"
        rows = "".join(f"<p><b>{k}</b>: {esc(v.get(k))}</p>" for k in R.EDITABLE_FIELDS if v.get(k))
        return f"<div style='flex:1;padding:0 8px'><h4>{title}</h4>{rows}</div>"

    nm, rs = card["needs_material"], card["russian_specific"]
    verdicts = (f"<p><b>Needs material</b>: LLM {esc(nm['llm'])} — {esc(nm['reason'])}; pre-check: "
                f"{esc(', '.join(nm['precheck']) or 'no markers')}</p>"
                f"<p><b>Russian-specific</b>: LLM {esc(rs['llm'])} — {esc(rs['reason'])}</p>"
                f"<p><b>Flags</b>: {esc(', '.join(card['review_flags']) or 'none')}</p>")
    return (f"<div><b>{esc(card['id'])}</b> (difficulty {esc(card['difficulty'] or 'unrated')})"
            f"<div style='display:flex'>{view(card['ru'], 'Russian')}{view(card['en'], 'English')}</div>"
            f"{verdicts}</div>")


def review_panel(build_dir: str | Path, reviewer: str, assigned: list[str] | None = None) -> Any:
    """The ipywidgets panel (see the module docstring); returns the widget to display."""
    import ipywidgets as W

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
                status.value = f"saved {code} for {card['id']}"
            except R.ReviewError as exc:
                status.value = f"<span style='color:#b00020'>{html.escape(str(exc))}</span>"
                return
            show()
        return handler

    for code, b in buttons.items():
        b.on_click(click(code))
    show()
    return W.VBox([head, body, W.VBox(list(edits.values())), note, W.HBox(list(buttons.values())), status])
