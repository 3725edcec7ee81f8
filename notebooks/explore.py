# CresOWLve explorer (marimo app, no Jupyter kernel needed): `marimo run notebooks/explore.py`
# Options after `--`: --runs 'data/runs/demo/*' --items demo --labels data/runs/errors/MODEL
# Without --runs/--labels it opens the newest runs and error labels that exist (cresowlve_core.discover).
# The marimo counterpart of notebooks/explore.ipynb; all logic in cresowlve_core.explore. Reads only.
import marimo

__generated_with = "0.25.2"
app = marimo.App(width="full")


@app.cell
def _():
    import marimo as mo

    from cresowlve_core import explore as X
    from cresowlve_core.untrusted import markdown

    return X, markdown, mo


@app.cell
def _(mo):
    _args = mo.cli_args()
    runs_arg = _args.get("runs") or None  # None: the newest runs under <data dir>/runs
    items_arg = _args.get("items") or "demo"
    labels_arg = _args.get("labels") or None  # None: the newest error labels
    return items_arg, labels_arg, runs_arg


@app.cell
def _(X, items_arg, labels_arg, mo, runs_arg):
    from cresowlve_core import discover

    runs_in = mo.ui.text(value=runs_arg or str(discover.newest_runs().path or ""),
                         label="runs (glob, folder or grid.json; empty: the newest)", full_width=True)
    items_in = mo.ui.text(value=items_arg, label="items (demo, hub:en, hub:ru or a file)")
    labels_found = labels_arg or discover.newest_error_labels().path
    labels_in = mo.ui.text(value=str(labels_found or ""),
                           label="error labels (errors --out-dir or labels.jsonl; optional)", full_width=True)
    mo.vstack([mo.md("# CresOWLve explorer: items and model answers"), runs_in, mo.hstack([items_in, labels_in])])
    return items_in, labels_found, labels_in, runs_in


@app.cell
def _(X, items_in, labels_found, labels_in, markdown, mo, runs_in):
    problem = None
    # an emptied labels field means none; left empty because nothing was found, the explorer says where it looked
    _labels = labels_in.value.strip() or (() if labels_found else None)
    try:
        ex = X.load_explorer(runs_in.value.strip() or None, items_in.value.strip() or "demo", labels=_labels)
    except (OSError, ValueError) as exc:  # the demo items alone: the runs or labels that failed are not read again
        ex, problem = X.load_explorer([], "demo", labels=()), f"{type(exc).__name__}: {exc}"
    opt = X.options(ex)
    notes = "".join(f"\n* {n}" for n in ex.notes)
    mo.vstack([mo.Html(ex.banners_html()), mo.md(markdown(f"**{problem}** (showing the demo items)")) if problem else mo.md(""),
               mo.md(markdown(ex.summary() + (f"\n\nNotes:{notes}" if notes else "")))])
    return ex, opt


@app.cell
def _(X, ex, mo, opt):
    ANY = "any"

    def _choices(pairs):
        return {ANY: ANY, **{label: value for label, value in pairs}}

    lang = mo.ui.dropdown(options=[ANY, *opt["langs"]], value=ANY, label="language")
    lo, hi = opt["difficulty"] or (0, 0)
    difficulty = mo.ui.range_slider(start=int(lo), stop=max(int(hi), int(lo) + 1), step=1, value=[int(lo), int(hi)],
                                    label="difficulty", show_value=True, disabled=opt["difficulty"] is None)
    domain = mo.ui.dropdown(options=_choices(opt["knowledge_domain"]), value=ANY, label="knowledge domain")
    concept = mo.ui.dropdown(options=_choices(opt["creative_concept"]), value=ANY, label="creative concept")
    culture = mo.ui.dropdown(options=_choices(opt["culture"]), value=ANY, label="culture")
    models = mo.ui.multiselect(options=opt["configs"], label="models (none: all)")
    outcome = mo.ui.radio(options=list(X.OUTCOMES), value="any", inline=True,
                          label="outcome (judge where it scored, else strict EM)")
    error = mo.ui.dropdown(options=_choices(opt["error_category"]), value=ANY, label="error category")
    search = mo.ui.text(label="search", placeholder="question, answer or prediction")
    controls = [mo.hstack([lang, difficulty, search], justify="start"), mo.hstack([domain, concept, culture],
                                                                                  justify="start")]
    if ex.has_runs:
        controls.append(mo.hstack([models, outcome] + ([error] if ex.has_labels else []), justify="start"))
    mo.vstack(controls)
    return ANY, concept, culture, difficulty, domain, error, hi, lang, lo, models, outcome, search


@app.cell
def _(ANY, X, concept, culture, difficulty, domain, error, ex, hi, lang, lo, mo, models, opt, outcome, search):
    def _v(w):
        return None if w.value in (ANY, None) else w.value

    full = opt["difficulty"] is None or tuple(difficulty.value) == (int(lo), int(hi))
    filters = X.Filters(langs=(lang.value,) if _v(lang) else None,
                        difficulty=None if full else (float(difficulty.value[0]), float(difficulty.value[1])),
                        knowledge_domain=_v(domain), creative_concept=_v(concept), culture=_v(culture),
                        configs=tuple(models.value) or None, outcome=outcome.value, error_category=_v(error),
                        text=search.value)
    listing = X.item_list(X.filter_frame(ex.frame, filters))
    table = mo.ui.table(listing.head(X.MAX_LIST), selection="single", page_size=12, show_download=False,
                        initial_selection=[0] if len(listing) else None, label="items (choose one)")
    more = f" (the first {X.MAX_LIST} are listed; narrow the filters)" if len(listing) > X.MAX_LIST else ""
    mo.vstack([mo.md(f"**{len(listing)}** item(s), {int(listing['n_answers'].sum()) if len(listing) else 0} "
                     f"answer(s) match{more}"), table])
    return filters, listing, table


@app.cell
def _(X, ex, filters, listing, mo, table):
    chosen = table.value if len(table.value) else listing.head(1)
    if len(chosen):
        row = chosen.iloc[0]
        detail = X.item_detail(ex, str(row["id"]), str(row["lang"]), configs=filters.configs)
        view = mo.Html(X.detail_html(detail))
    else:
        detail, view = None, mo.md("_No item matches these filters._")
    view
    return (detail,)


if __name__ == "__main__":
    app.run()
