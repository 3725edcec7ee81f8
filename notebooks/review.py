# Human validation and the agreement re-annotation of a CresOWLve build (marimo app):
#   marimo run notebooks/review.py [-- --build data/builds/NAME --reviewer ann --mode agreement]
# Without --build it opens the newest build under data/builds (cresowlve_core.discover.newest_build).
# Same core API as the JupyterLab panel (cresowlve_core.construction.review / review_panel).
import marimo

__generated_with = "0.25.2"
app = marimo.App(width="full")


@app.cell
def _():
    import marimo as mo

    from cresowlve_core.construction import review as R
    from cresowlve_core.construction.review_panel import MODES, card_html, embedded_banner_html
    from cresowlve_core.construction.vocab import CONCEPTS, DOMAIN_GROUPS, REASONING_TYPES
    from cresowlve_core.discover import newest_build
    from cresowlve_core.untrusted import markdown  # ids, names and file lines in a message are shown as text

    return CONCEPTS, DOMAIN_GROUPS, MODES, R, REASONING_TYPES, card_html, embedded_banner_html, markdown, mo, newest_build


@app.cell
def _(newest_build):
    found = newest_build()  # the newest data/builds/*/build.json, and where it was sought
    return (found,)


@app.cell
def _(MODES, found, mo):
    _args = mo.cli_args()
    build_dir = mo.ui.text(value=str(_args.get("build") or found.path or ""), label="build directory",
                           full_width=True)
    reviewer = mo.ui.text(value=str(_args.get("reviewer") or "reviewer"), label="reviewer")
    mode = mo.ui.radio(options={"human validation (decisions)": MODES[0], "agreement sample (labels)": MODES[1]},
                       value="agreement sample (labels)" if _args.get("mode") == MODES[1]
                       else "human validation (decisions)", label="mode", inline=True)
    mo.vstack([mo.md("# CresOWLve review"), build_dir, reviewer, mode])
    return build_dir, mode, reviewer


@app.cell
def _(R, build_dir, embedded_banner_html, found, markdown, mo, mode, reviewer):
    get_saved, set_saved = mo.state(0)
    get_message, set_message = mo.state("")  # the last save's confirmation, kept across the next card
    session, problem, _banner = None, None, ""
    try:
        if not build_dir.value.strip():
            problem = f"{found.nothing()}: run `cresowlve build` first, or enter a build directory"
        elif mode.value == "agreement":
            session = R.AnnotationSession(build_dir.value, reviewer.value)
        else:
            session = R.ReviewSession(build_dir.value, reviewer.value)
        if session is not None:  # verdicts and translations of the embedded 270M model are not results: say so on top
            _banner = embedded_banner_html(build_dir.value)
    except (FileNotFoundError, R.UsageError) as exc:  # no queue, no reviewer name, a review file that cannot be read
        problem = str(exc)
    mo.vstack([x for x in (mo.Html(_banner) if _banner else None,
                           mo.md(f"**{markdown(problem)}**") if problem else None) if x is not None])
    return get_message, get_saved, session, set_message, set_saved


@app.cell
def _(R, card_html, get_message, get_saved, markdown, mo, session):
    get_saved()
    last = get_message()
    note_box = mo.callout(mo.md(markdown(last)), kind="success" if last.startswith("saved") else "warn") if last else None
    reviewing = isinstance(session, R.ReviewSession)
    card = session.next_card() if reviewing else None
    done, total = session.progress() if reviewing else (0, 0)
    code = mo.ui.dropdown(options=list(R.DECISIONS), value="keep", label="decision")
    note = mo.ui.text(label="note (required for 'other')", full_width=True)
    # one labelled text area per English field (a ui.dictionary drew them as a JSON-like dict)
    edits = mo.md("**English** (edited fields are saved with the decision fix_translation)\n\n"
                  + "\n\n".join(f"{{{f}}}" for f in R.EDITABLE_FIELDS)).batch(**{
        f: mo.ui.text_area(value=((card or {}).get("en") or {}).get(f) or "", label=f.replace("_", " "), full_width=True)
        for f in R.EDITABLE_FIELDS})
    save = mo.ui.run_button(label="save decision")
    view = (None if not reviewing else mo.md("All items decided.") if card is None else
            mo.vstack([mo.md(f"{done} / {total} decided"), mo.Html(card_html(card)), edits, code, note, save]))
    mo.vstack([x for x in (note_box, view) if x is not None]) if reviewing else None
    return card, code, edits, note, save


@app.cell
def _(R, card, code, edits, note, save, session, set_message, set_saved):
    # the confirmation goes to a state shown above the next card (this cell's output is cleared
    # when the next card's button replaces the one that was clicked)
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
        set_message(message)
    return


@app.cell
def _(CONCEPTS, DOMAIN_GROUPS, R, REASONING_TYPES, card_html, get_message, get_saved, markdown, mo, session):
    get_saved()
    a_last = get_message()
    labelling = isinstance(session, R.AnnotationSession)
    a_card = session.next_card() if labelling else None
    a_done, a_total = session.progress() if labelling else (0, 0)
    reasoning = mo.ui.radio(options=list(REASONING_TYPES), label="reasoning type", inline=True)
    concepts = mo.ui.multiselect(options=list(CONCEPTS), label="creative concepts (the 16 labels)", full_width=True)
    domains = mo.ui.multiselect(options=list(DOMAIN_GROUPS), label="knowledge domains (the 34 groups)",
                                full_width=True)
    cultures = mo.ui.text(label="cultures (comma-separated; saved lower case)", full_width=True)
    a_save = mo.ui.run_button(label="save annotation")
    a_view = (None if not labelling else
              mo.md("All sampled items annotated. Run the build again to score the agreement.") if a_card is None else
              mo.vstack([mo.md(f"agreement sample: {a_done} / {a_total} annotated"),
                         mo.Html(card_html(a_card, verdicts=False)), reasoning, concepts, domains, cultures, a_save]))
    a_box = mo.callout(mo.md(markdown(a_last)), kind="success" if a_last.startswith("saved") else "warn") if a_last else None
    mo.vstack([x for x in (a_box, a_view) if x is not None]) if labelling else None
    return a_card, a_save, concepts, cultures, domains, reasoning


@app.cell
def _(R, a_card, a_save, concepts, cultures, domains, reasoning, session, set_message, set_saved):
    a_message = ""
    if a_save.value and a_card is not None:
        try:
            session.annotate_form(a_card["id"], reasoning_type=reasoning.value, concepts=concepts.value,
                                  domains=domains.value, cultures=cultures.value)
            a_message = f"saved annotation of {a_card['id']}"
            set_saved(lambda n: n + 1)
        except R.ReviewError as exc:
            a_message = f"not saved: {exc}"
        set_message(a_message)
    return


if __name__ == "__main__":
    app.run()
