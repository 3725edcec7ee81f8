"""Which answers the statistics count: the numbers of 03, 04, 05 and 07 on paper-scale synthetic
runs, with edited runs for the edge cases, printed by whatever code is first on PYTHONPATH.

    .venv/bin/python bench/validity.py [--work DIR] [--before TREE ...] [--render]

For example, with a worktree of the commit before the fixes (``git worktree add /tmp/before
ae8f7b3 --detach``): ``.venv/bin/python bench/validity.py --before /tmp/before --render``
(about 15 minutes on a loaded 2-core machine; ``--render`` adds 03_analysis on ``err40``).

Writes (under a temporary directory, or ``--work``; never the checkout's data/ or reports/):

- ``base``: 18 configurations × En/Ru × 2,061 items (``write_synthetic_runs``, seed 0);
- ``err40``: the same, with 40% of one configuration's En records turned into API errors
  (``status: error``, no prediction, no score, judge not run; seeded). The configuration is the
  one whose base En-vs-Ru judge row is least significant among those at ≥ 40% accuracy;
- ``noverdict``: two configurations, the second's Ru run with no judge verdict at all.

Then prints, for this code and for each ``--before`` tree (a git worktree of an older commit, run
in a subprocess with that tree first on PYTHONPATH), the paired En-vs-Ru row of the edited
configuration (and how many pairs it dropped), the Table 1 bounds of its En judge cell,
judge-vs-EM κ (per run, the all-runs row and its interval width), McNemar with 0 pairs, error
shares and the test between configurations, contamination's matched difference (null coverage
with small strata, a not-tested row's interval), a CREATE comparison, and strict EM against the
released code's exact match on ``tests/fixtures/paper_extraction/outputs.jsonl``. A number the
older code cannot compute is printed as ``n/a`` with the reason.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "paper_extraction" / "outputs.jsonl"
ERROR_SHARE = 0.4
N_NULL = 1000  # null simulations of contamination's matched difference


def _get(row: Any, name: str) -> Any:
    return row[name] if name in row else "n/a (no such column)"


def _fmt(v: Any) -> str:
    if isinstance(v, float | np.floating):
        return "nan" if math.isnan(v) else f"{v:.4g}"
    return str(v)


def _show(label: str, row: Any, names: list[str]) -> None:
    print(f"  {label}: " + ", ".join(f"{n}={_fmt(_get(row, n))}" for n in names))


def _section(title: str, body: Callable[[], None]) -> None:
    print(f"\n## {title}")
    try:
        body()
    except Exception as exc:  # an older code base may lack the function: say so, go on
        print(f"  n/a: {type(exc).__name__}: {exc}")


# ---------------------------------------------------------------------------- making the runs

def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _write(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")


def _as_error(rec: dict[str, Any]) -> dict[str, Any]:
    return {**rec, "status": "error", "outcome": "error", "error": "synthetic API error (HTTP 503)",
            "prediction": None, "em_strict": None, "em_lenient": None, "scores": None,
            "judge_status": "not_run", "judge_verdict": None}


def _without_verdict(rec: dict[str, Any]) -> dict[str, Any]:
    return {**rec, "judge_status": "not_run", "judge_verdict": None}


def make_runs(work: Path) -> dict[str, Any]:
    from cresowlve_core.analysis import load_runs, write_synthetic_runs
    from cresowlve_core.analysis.paired import cross_lingual

    if (work / "meta.json").exists():
        return json.loads((work / "meta.json").read_text(encoding="utf-8"))
    base = work / "base"
    if not base.exists():
        write_synthetic_runs(base, n_items=2061, configs=18, seed=0)
    rs = load_runs(str(base / "*"))
    cross = cross_lingual(rs, "judge")
    cands = cross[(cross["acc_en"] >= 40) & (cross["acc_ru"] >= 40)]
    config = str(cands.sort_values("p", ascending=False)["config"].iloc[0])
    runs = rs.runs.set_index(["config", "lang"])["path"] if "path" in rs.runs else None
    en_dir = Path(runs.loc[(config, "en")]) if runs is not None else None
    if en_dir is None:
        raise SystemExit("load_runs gave no run paths")
    err40 = work / "err40"
    if not err40.exists():
        shutil.copytree(base, err40)
        target = err40 / en_dir.name / "responses.jsonl"
        recs = _records(target)
        rng = np.random.default_rng(40)
        hit = rng.choice(len(recs), size=int(round(ERROR_SHARE * len(recs))), replace=False)
        for i in hit:
            recs[i] = _as_error(recs[i])
        _write(target, recs)
    noverdict = work / "noverdict"
    pair = [str(c) for c in cross["config"].iloc[:2]]
    if not noverdict.exists():
        noverdict.mkdir()
        for c in pair:
            for lang in ("en", "ru"):
                src = Path(runs.loc[(c, lang)])
                shutil.copytree(src, noverdict / src.name)
                if c == pair[1] and lang == "ru":
                    target = noverdict / src.name / "responses.jsonl"
                    _write(target, [_without_verdict(r) for r in _records(target)])
    meta = {"config": config, "en_run": en_dir.name, "noverdict_configs": pair}
    (work / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return meta


# ---------------------------------------------------------------------------- the numbers

def _creative(work: Path, variant: str) -> pd.DataFrame:
    """The runs' creative items: the population of 03's paired section and Table 1."""
    from cresowlve_core.analysis import load_runs
    from cresowlve_core.analysis.loading import main_subset

    return main_subset(load_runs(str(work / variant / "*")).responses)[0]


def paired_rows(work: Path, meta: dict[str, Any]) -> None:
    from cresowlve_core.analysis.paired import cross_lingual

    names = ["n", "acc_en", "acc_ru", "diff", "low", "high", "ru_right_en_wrong", "en_right_ru_wrong", "p", "p_holm",
             "method", "n_error_en", "n_error_ru", "dropped"]
    for variant in ("base", "err40"):
        cross = cross_lingual(_creative(work, variant), "judge").set_index("config")
        _show(f"{variant}, {meta['config']}, judge, Ru − En", cross.loc[meta["config"]], names)
        sig = int((cross["p_holm"] < 0.05).sum())
        print(f"  {variant}: {sig} of {cross['p_holm'].notna().sum()} En-vs-Ru judge rows significant after Holm")


def table1_cell(work: Path, meta: dict[str, Any]) -> None:
    from cresowlve_core.analysis import load_runs
    from cresowlve_core.analysis.table import results_long

    long = results_long(load_runs(str(work / "err40" / "*")))
    cell = long.query("metric == 'judge' and lang == 'en' and config == @meta['config']").iloc[0]
    _show(f"err40, {meta['config']} / en / judge", cell,
          ["k", "n", "n_all", "n_error", "pct", "bound_low", "bound_high", "coverage", "low_coverage"])


def kappa(work: Path, meta: dict[str, Any]) -> None:
    from cresowlve_core.analysis import load_runs
    from cresowlve_core.analysis.reliability import judge_vs_em

    for variant in ("base", "err40"):
        out = judge_vs_em(load_runs(str(work / variant / "*")).responses, n_boot=300, seed=0)
        per = out[out["config"] != "all runs"]
        pooled = out[out["config"] == "all runs"].iloc[0]
        print(f"  {variant}: per-run κ {per['kappa'].min():.3f}–{per['kappa'].max():.3f} over {len(per)} runs "
              f"(mean {per['kappa'].mean():.3f})")
        _show(f"{variant}, all runs", pooled, ["kappa", "kappa_low", "kappa_high", "n", "kappa_note"])
        print(f"  {variant}, all runs: interval width {pooled['kappa_high'] - pooled['kappa_low']:.4f}")
        if variant == "err40":
            row = per[(per["config"] == meta["config"]) & (per["lang"] == "en")].iloc[0]
            _show(f"err40, {meta['config']} / en", row, ["kappa", "n", "n_error"])


def zero_pairs(work: Path, meta: dict[str, Any]) -> None:
    from cresowlve_core.analysis import load_runs
    from cresowlve_core.analysis.paired import cross_lingual
    from cresowlve_core.analysis.table import results_long

    rs = load_runs(str(work / "noverdict" / "*"))
    cross = cross_lingual(_creative(work, "noverdict"), "judge").set_index("config")
    a, b = meta["noverdict_configs"]
    _show(f"{b} (Ru never judged)", cross.loc[b], ["n", "p", "p_holm", "method", "low", "high"])
    _show(f"{a} (family member)", cross.loc[a], ["n", "p", "p_holm"])
    cell = results_long(rs).query("metric == 'judge' and lang == 'ru' and config == @b").iloc[0]
    _show(f"Table 1 {b} / ru / judge", cell, ["n", "coverage", "low_coverage"])


def _answers(config: str, lang: str, labels: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame([{"key": f"{config}|{lang}|{i}", "config": config, "lang": lang, "group": f"{config} · {lang}",
                          "id": i, "state": "labelled", "label": c, "bucket": c} for i, c in labels.items()])


def _chi2(frame: pd.DataFrame, a: str, b: str) -> dict[str, Any]:
    from cresowlve_core.error_analysis.distribution import chi2_between, distribution

    try:  # the test reads the answers (item-clustered)
        return chi2_between(frame, a, b, by="config")
    except (KeyError, TypeError, ValueError):  # an older test read the distribution table
        return chi2_between(distribution(frame, by="config"), a, b, by="config")


def error_shares(work: Path, meta: dict[str, Any]) -> None:
    from cresowlve_core.error_analysis.distribution import distribution

    items = [f"q{i}" for i in range(4)]
    en = _answers("m", "en", dict.fromkeys(items, "missing_creative_connection"))
    ru = _answers("m", "ru", {i: ("missing_creative_connection" if j < 2 else "hallucination") for j, i in enumerate(items)})
    d = distribution(pd.concat([en, ru]), by="config").set_index("category")
    print("  En all 'missing creative connection', Ru half that, half 'hallucination': shares "
          f"{d.loc['missing_creative_connection', 'p']:.3f} / {d.loc['hallucination', 'p']:.3f}, "
          f"unit {_get(d.iloc[0], 'unit')}")
    # two configurations wrong on disjoint items with opposite labels: no shared item to compare
    a = _answers("a", "en", {f"a{i}": "overthinking" for i in range(20)})
    b = _answers("b", "en", {f"b{i}": "wrong_reference" for i in range(20)})
    res = _chi2(pd.concat([a, b]), "a", "b")
    print(f"  disjoint items, opposite labels: χ² {res['chi2']:.2f}, p {_fmt(res['p'])}, "
          f"shared items {res.get('n_shared_items', 'n/a')}")
    # paper scale: 18 configurations' judge-wrong answers on the same items, labels depending on the item
    from cresowlve_core.analysis import load_runs

    r = load_runs(str(work / "base" / "*")).responses
    wrong = r[(r["judge"] == 0.0) & r["config"].isin(sorted(r["config"].unique())[:2])]
    cats = np.array(["missing_creative_connection", "hallucination", "overthinking", "wrong_reference"])
    rng = np.random.default_rng(5)
    item_cat = {i: cats[rng.integers(4)] for i in wrong["id"].unique()}
    lab = [cats[rng.integers(4)] if rng.random() < 0.3 else item_cat[i] for i in wrong["id"]]
    frame = pd.DataFrame({"key": wrong["config"] + "|" + wrong["lang"] + "|" + wrong["id"], "config": wrong["config"],
                          "lang": wrong["lang"], "group": wrong["config"] + " · " + wrong["lang"], "id": wrong["id"],
                          "state": "labelled", "label": lab, "bucket": lab})
    c1, c2 = sorted(frame["config"].unique())
    d = distribution(frame, by="config")
    top = d[d["config"] == c1].sort_values("p", ascending=False).iloc[0]
    print(f"  paper scale, {c1}: {top['category']} {top['p']:.3f} [{top['low']:.3f}, {top['high']:.3f}] "
          f"n={top['n']} n_items={_get(top, 'n_items')}")
    res = _chi2(frame, c1, c2)
    print(f"  paper scale, {c1} vs {c2} (same items, labels follow the item): χ² {res['chi2']:.2f}, p {_fmt(res['p'])}, "
          f"shared items {res.get('n_shared_items', 'n/a')}")


def _null_sample(rng: np.random.Generator, sizes: list[int]) -> tuple[np.ndarray, np.ndarray]:
    rate = np.array([0.8, 0.6, 0.45, 0.3, 0.2])
    levels = np.repeat(np.arange(1, 6), sizes)
    return rng.binomial(3, rate[levels - 1]) / 3.0, levels


def contamination(work: Path, meta: dict[str, Any]) -> None:
    from cresowlve_core.contamination.itemstats import matched_diff

    rng = np.random.default_rng(2025)
    hits = 0
    widths = []
    for _ in range(N_NULL):
        x, xl = _null_sample(rng, [1, 2, 1, 3, 20])
        y, yl = _null_sample(rng, [2, 1, 3, 1, 25])
        m = matched_diff(x, xl, y, yl, n_boot=50, seed=0)
        hits += m.low <= 0 <= m.high
        widths.append(m.high - m.low)
    print(f"  matched_diff, small strata, {N_NULL} null simulations: coverage {hits / N_NULL:.3f} (nominal 0.95), "
          f"median width {np.median(widths):.3f}")
    x, xl = _null_sample(np.random.default_rng(1), [1, 2, 1, 3, 20])
    y, yl = _null_sample(np.random.default_rng(2), [2, 1, 3, 1, 25])
    m = matched_diff(x, xl, y, yl, n_boot=1000, seed=0)
    print(f"  one sample: matched_diff {m.diff:.3f} [{m.low:.3f}, {m.high:.3f}]")
    sys.path.insert(0, str(REPO / "tests" / "contamination"))
    from test_contamination_verdict import completions, quiz, result

    from cresowlve_core.contamination.verdict import verdict_table

    bcq = quiz("target", "t", 3) + quiz("wrong_both", "w", 0)
    v = verdict_table(result(bcq, completions("target", "t", 1.0, 0.1)), n_boot=100).set_index("test")
    row = v.loc["BCQ per-item accuracy, target − wrong_both"]
    print(f"  not-tested row ({row['reading'][:30]}…): interval [{_fmt(row['low'])}, {_fmt(row['high'])}]")
    from cresowlve_core.contamination import verdict

    print(f"  basis column {'basis' in v.columns}; Holm across models {hasattr(verdict, 'holm_across_models')}; "
          f"right_both deciding test {any('right_both (difference' in t for t in v.index)}")


def create_comparison(work: Path, meta: dict[str, Any]) -> None:
    from cresowlve_core.stats import paired_difference

    d = np.array([0.01] * 35 + [-0.3] * 5) + np.linspace(0, 0.001, 40)
    r = paired_difference(0.5 + d, np.full(40, 0.5), n_boot=4000, rng=0)
    p = getattr(r, "p_sign_flip", None)
    name = "sign-flip p of the mean"
    if p is None:
        p, name = getattr(r, "p_wilcoxon", float("nan")), "Wilcoxon p"
    print(f"  35 queries A slightly ahead, 5 far behind: mean {r.diff:.4f} [{r.low:.4f}, {r.high:.4f}], {name} {p:.4g}")


def paper_extraction(work: Path, meta: dict[str, Any]) -> None:
    from cresowlve_core.evaluation.metrics import Reference, formula_scores
    from cresowlve_core.evaluation.solve import extract_answer

    rows = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines()]
    bad = 0
    for r in rows:
        ours = extract_answer(r["output"])[0]
        try:
            em = formula_scores(r["output"], ours, Reference(r["reference"]))["em_strict"]
        except TypeError:  # older: strict EM scored our extraction
            em = formula_scores(ours, Reference(r["reference"]))["em_strict"]
        bad += em is not r["paper_exact_match"]
    print(f"  strict EM differs from the released exact match on {bad} of {len(rows)} realistic outputs")


SECTIONS: list[tuple[str, Callable[[Path, dict[str, Any]], None]]] = [
    ("Paired En vs Ru (03), judge", paired_rows),
    ("Table 1 bounds at 40% errors (03)", table1_cell),
    ("Judge vs strict EM κ (03)", kappa),
    ("McNemar with 0 pairs, a cell with 0 verdicts (03)", zero_pairs),
    ("Error shares and the test between configurations (04)", error_shares),
    ("Contamination (05)", contamination),
    ("CREATE comparison (07)", create_comparison),
    ("Paper extraction (strict EM)", paper_extraction),
]


def numbers(work: Path) -> None:
    meta = json.loads((work / "meta.json").read_text(encoding="utf-8"))
    import cresowlve_core

    print(f"# code: {Path(cresowlve_core.__file__).resolve().parents[1]}")
    print(f"# edited configuration: {meta['config']} (En: {ERROR_SHARE:.0%} errors); "
          f"never judged in Ru: {meta['noverdict_configs'][1]}")
    for title, fn in SECTIONS:
        _section(title, lambda fn=fn: fn(work, meta))


def render(work: Path, tree: Path) -> None:
    """03_analysis on ``err40`` with ``tree``'s code and notebook (reports and data in ``work``),
    then the values the notebook recorded for the edited configuration."""
    name = tree.resolve().name
    reports = work / f"reports-{name}"
    env = {**os.environ, "PYTHONPATH": str(tree.resolve()), "CRESOWLVE_REPORTS_DIR": str(reports),
           "CRESOWLVE_DATA_DIR": str(work / f"data-{name}")}
    done = subprocess.run([sys.executable, "-m", "cresowlve_core.cli", "report", "03_analysis", "-p", "runs",
                           str(work / "err40" / "*"), "--reports-dir", str(reports)], env=env, cwd=str(tree),
                          check=False, stdout=subprocess.DEVNULL)
    notebooks = sorted(reports.glob("03_analysis*.ipynb"))
    if done.returncode != 0 or not notebooks:
        print(f"# 03_analysis with {tree}: render failed (exit {done.returncode})")
        return
    from cresowlve_core.notebook_records import read_records

    meta = json.loads((work / "meta.json").read_text(encoding="utf-8"))
    nb = notebooks[0]
    rec = read_records(nb)
    print(f"# 03_analysis rendered with {tree} ({nb})")
    row = next(r for r in rec["paired"]["cross_lingual"] if r["config"] == meta["config"])
    print("  paired En vs Ru: " + ", ".join(f"{k}={_fmt(row.get(k, 'n/a'))}" for k in
                                            ("n", "diff", "low", "high", "p", "p_holm", "dropped")))
    t1 = next(r for r in rec["table1"]["rows"] if r["config"] == meta["config"])
    print("  Table 1 En judge: " + ", ".join(f"{label}={_fmt(t1.get('en_llm_judge' + k, 'n/a'))}" for label, k in
                                             (("pct", ""), ("n", "_n"), ("n_all", "_n_all"), ("coverage", "_coverage"))))
    rel = rec["reliability"]
    print(f"  judge vs EM κ (all runs): {rel['kappa_em']} {rel['kappa_em_ci']}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=None, help="keep the runs here (default: a temporary folder)")
    ap.add_argument("--before", type=Path, action="append", default=[], help="an older tree to run the numbers with")
    ap.add_argument("--render", action="store_true", help="also render 03_analysis on err40 with each tree")
    ap.add_argument("--numbers-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="cresowlve-validity-"))
    if args.numbers_only:
        numbers(work)
        return 0
    sys.path.insert(0, str(REPO))
    make_runs(work)
    print(f"runs in {work}", flush=True)
    for tree in [*args.before, REPO]:
        env = {**os.environ, "PYTHONPATH": str(tree.resolve())}
        subprocess.run([sys.executable, str(Path(__file__).resolve()), "--work", str(work), "--numbers-only"],
                       env=env, check=False, cwd=str(tree))
        print(flush=True)
        if args.render:
            render(work, tree)
            print(flush=True)
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
