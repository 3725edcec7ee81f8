# Human validation of a CresOWLve build (marimo app): `marimo run notebooks/review.py`.
# Same core API as the JupyterLab panel (cresowlve_core.construction.review).
import marimo

__generated_with = "0.25.2"
app = marimo.App(width="full")


@app.cell
def _():
    import marimo as mo

    from cresowlve_core.construction import review as R
    from cresowlve_core.construction.review_panel import card_html
    from cresowlve_core.paths import DATA_DIR

    return DATA_DIR, R, card_html, mo


@app.cell
def _(DATA_DIR, mo):
    build_dir = mo.ui.text(value=str(DATA_DIR / "builds" / "demo"), label="build directory", full_width=True)
    reviewer = mo.ui.text(value="reviewer", label="reviewer")
    mo.vstack([mo.md("# CresOWLve human validation"), build_dir, reviewer])
    return build_dir, reviewer


@app.cell
def _(R, build_dir, mo, reviewer):
    get_saved, set_saved = mo.state(0)
    try:
        session = R.ReviewSession(build_dir.value, reviewer.value)
        problem = None
    except (FileNotFoundError, R.ReviewError) as exc:
        session, problem = None, str(exc)
    mo.md(f"**{problem}**") if problem else None
    return get_saved, session, set_saved


@app.cell
def _(R, card_html, get_saved, mo, session):
    get_saved()
    card = session.next_card() if session else None
    done, total = session.progress() if session else (0, 0)
    code = mo.ui.dropdown(options=list(R.DECISIONS), value="keep", label="decision")
    note = mo.ui.text(label="note (required for 'other')", full_width=True)
    edits = mo.ui.dictionary({f: mo.ui.text_area(value=((card or {}).get("en") or {}).get(f) or "", full_width=True)
                              for f in R.EDITABLE_FIELDS}, label="English (edited fields are saved with fix_translation)")
    save = mo.ui.run_button(label="save decision")
    view = (mo.md("All items decided (or no queue yet).") if card is None else
            mo.vstack([mo.md(f"{done} / {total} decided"), mo.Html(card_html(card)), edits, code, note, save]))
    view
    return card, code, edits, note, save


@app.cell
def _(R, card, code, edits, mo, note, save, session, set_saved):
    message = ""
    if save.value and card is not None:
        old = card["en"] or {}
        fixes = {f: v for f, v in edits.value.items() if (v or "") != (old.get(f) or "")}
        try:
            session.decide(card["id"], code.value, note=note.value,
                           fixes=fixes if code.value == "fix_translation" else None)
            message = f"saved {code.value} for {card['id']}"
            set_saved(lambda n: n + 1)
        except R.ReviewError as exc:
            message = f"not saved: {exc}"
    mo.md(message)
    return


if __name__ == "__main__":
    app.run()
