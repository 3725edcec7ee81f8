# Manual error annotation (marimo app): `marimo run notebooks/annotate_errors.py [-- --sample PATH --annotator NAME]`.
# The marimo counterpart of the ipywidgets panel in notebooks/04_error_analysis.ipynb; same core API
# (cresowlve_core.error_analysis.annotation). Without --sample it opens the newest annotations/sample.jsonl that
# the error analysis wrote (cresowlve errors report, the main job): cresowlve_core.discover.newest_error_sample.
import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium")


@app.cell
def _():
    import marimo as mo

    from cresowlve_core.banners import banner_html, is_embedded_model
    from cresowlve_core.discover import newest_error_sample
    from cresowlve_core.error_analysis import annotation as A
    from cresowlve_core.untrusted import markdown

    return A, banner_html, is_embedded_model, markdown, mo, newest_error_sample


@app.cell
def _(newest_error_sample):
    found = newest_error_sample()  # the newest annotations/sample.jsonl, and where it was sought
    return (found,)


@app.cell
def _(found, mo):
    _args = mo.cli_args()
    sample_path = mo.ui.text(value=str(_args.get("sample") or found.path or ""), label="annotation sample (JSONL)",
                             full_width=True)
    annotator = mo.ui.text(value=str(_args.get("annotator") or ""), label="your name")
    mo.vstack([mo.md("# CresOWLve error annotation"), sample_path, annotator])
    return annotator, sample_path


@app.cell
def _(A, annotator, banner_html, found, is_embedded_model, markdown, mo, sample_path):
    from pathlib import Path

    get_saved, set_saved = mo.state(0)
    get_message, set_message = mo.state("")  # the last save's confirmation, kept across the next item
    problem = None
    store, rows = None, []
    path = Path(sample_path.value.strip()).expanduser()
    if not sample_path.value.strip():
        problem = (f"{found.nothing()}: run `cresowlve errors report --runs ...` (or the main job) first, "
                   "or enter a sample path")
    elif not path.is_file():
        problem = (f"no sample at {path}: `cresowlve errors report --runs ...` writes one "
                   "(OUT_DIR/annotations/sample.jsonl)")
    elif not annotator.value.strip():
        # the path is written as code: as markdown, <sample folder> and <name> were HTML tags (shown "/.jsonl")
        problem = f"enter your name to start (labels go to `{path.parent}/<your name>.jsonl`)"
    else:
        try:  # a name the store refuses, a sample file that cannot be read: said, not a traceback
            store = A.AnnotationStore(path.parent, annotator.value)
            store.labels()  # the annotator's earlier labels, read before the first item is shown
            rows = A.read_sample(path).to_dict("records")
        except ValueError as exc:
            problem, store = str(exc), None
    # answers of the embedded 270M model (the main job's demo) are not results: say so on top
    embedded = sorted({str(r["config"]) for r in rows if is_embedded_model(str(r["config"]).split(" (")[0])})
    _banner = mo.Html(banner_html("embedded", f"Answers here come from {', '.join(embedded)}.")) if embedded else None
    mo.vstack([x for x in (_banner, mo.md(markdown(f"**{problem}**")) if problem else None) if x is not None])
    return embedded, get_message, get_saved, rows, set_message, set_saved, store


@app.cell
def _(A, get_message, get_saved, markdown, mo, rows, store):
    get_saved()
    last = get_message()
    keys = [str(r["key"]) for r in rows]
    i = store.next_index(keys) if store else 0
    row = rows[i] if store and i < len(rows) else None
    choice = mo.ui.radio(options={A.choice_label(c): c for c in A.CHOICES}, label="category")
    note = mo.ui.text_area(label="note (optional)", full_width=True)
    save = mo.ui.run_button(label="save and next")
    _labelled = store.labels() if store else {}
    done = sum(k in _labelled for k in keys)  # this sample's items: labels of an earlier sample are not counted
    view = (mo.md(f"All {len(rows)} items labelled." if store else "") if row is None else
            mo.vstack([mo.md(f"Item {i + 1} of {len(rows)} · {done} labelled by you"), mo.Html(A.item_html(row)),
                       choice, note, save]))
    # the message names the item by its id, a string of the sample (from a run directory): rendered without raw HTML
    mo.vstack([mo.callout(mo.md(markdown(last)), kind="success" if last.startswith("saved") else "warn"), view]) if last else view
    return choice, note, row, save


@app.cell
def _(choice, note, row, save, set_message, set_saved, store):
    # the confirmation goes to a state shown above the next item: this cell's own output is
    # cleared when the next item's button replaces the one that was clicked
    if save.value and row is not None:
        if choice.value is None:
            set_message("choose a category first")
        else:
            store.save(str(row["key"]), choice.value, note.value)
            set_message(f"saved {choice.value} for {row['id']}")
            set_saved(lambda n: n + 1)
    return


if __name__ == "__main__":
    app.run()
