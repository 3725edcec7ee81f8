"""04_error_analysis and 05_contamination rendered on the paper-scale synthetic runs of
``bench/validity.py`` (``base`` and ``err40``), by this code and by each ``--before`` tree.

    .venv/bin/python bench/validity_reports.py --work DIR [--before TREE ...] [--max-items N]

Writes under ``--work`` (never the checkout's data/ or reports/):

- ``items.jsonl``: one ``Item`` per synthetic id (``synthetic_00000`` …), En and Ru views whose
  questions are synthetic text, and copies of the runs (``r-base``, ``r-err40``) whose manifests
  name that file, so the error collection and the contamination sets load their items;
- ``errors/labels/synthetic-labeller``: every wrong answer of ``r-base`` labelled by
  ``cresowlve errors label`` against a local fake endpoint whose model is ``synthetic-labeller``
  (the category follows the item, 30% of answers get another one at random);
- ``cont-<variant>``: ``cresowlve contamination run`` (``--max-items`` per set and configuration)
  against the same endpoint, perturber ``synthetic-perturber`` and quiz-taker
  ``synthetic-quiz-taker`` (it "remembers" every fifth item: it picks that original in the quiz
  and completes it word for word; otherwise it picks A and does not know the text).

Then each tree renders both notebooks with ``cresowlve report`` on both variants, with the same
endpoint. This code gets a copy of the seeded folders as ``out_dir`` (resuming them sends
nothing); a ``--before`` tree gets an empty ``out_dir`` and makes its own labels and quizzes, in
its own format, from the same deterministic endpoint. The number of calls each render sent is
printed. Printed per render: the report's path and the
numbers its records hold. Every model name here is synthetic: nothing is a result.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests"))

LABELLER, PERTURBER, QUIZ = "synthetic-labeller", "synthetic-perturber", "synthetic-quiz-taker"
LABEL_TOKENS, CONT_TOKENS = 512, 256  # the CLI defaults; the renders pass the same so the runs resume
VARIANTS = ("base", "err40")
_NUM = re.compile(r"(?:Synthetic puzzle|Синтетический вопрос) (\d{5})")


def ru_question(n: int) -> str:
    return (f"Синтетический вопрос {n:05d}: этот знаменитый учёный однажды сказал, что ИКС важнее знания. "
            "Назовите ИКС.")


def _unit(*parts: object) -> float:
    """A number in [0, 1) fixed by ``parts`` (the fake endpoint's seed)."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def write_items(work: Path, n_items: int = 2061) -> Path:
    from cresowlve_core.analysis.synthetic_runs import synthetic_items
    from cresowlve_core.items import Item, ItemView

    path = work / "items.jsonl"
    if path.exists():
        return path
    rows = synthetic_items(n_items, seed=0)
    items = [Item(id=r.id, difficulty=int(r.difficulty),
                  en=ItemView(question=f"Synthetic puzzle {n:05d}: this famous scientist once said that X matters "
                                       "more than knowledge. Name X.", answer=f"A{n}"),
                  ru=ItemView(question=ru_question(n), answer=f"О{n}"))
             for n, r in enumerate(rows.itertuples())]
    path.write_text("".join(json.dumps(it.model_dump(), ensure_ascii=False) + "\n" for it in items), encoding="utf-8")
    return path


def runs_with_items(work: Path, variant: str, items: Path) -> Path:
    """A copy of ``work/variant`` whose manifests name ``items`` (the generator writes ``synthetic:N``)."""
    out = work / f"r-{variant}"
    if out.exists():
        return out
    shutil.copytree(work / variant, out)
    for m in out.glob("*/manifest.json"):
        manifest = json.loads(m.read_text(encoding="utf-8"))
        manifest["items"] = str(items)
        m.write_text(json.dumps(manifest), encoding="utf-8")
    return out


def synthetic_model(n_items: int = 2061) -> Any:
    """The fake endpoint's replies for the labeller, the perturber and the quiz-taker."""
    from cresowlve_core.error_analysis.taxonomy import CATEGORIES

    originals = {" ".join(ru_question(n).split()): n for n in range(n_items)}
    names = [c.name for c in CATEGORIES]
    weights = [0.35, 0.2, 0.15, 0.1, 0.1, 0.05, 0.05][:len(names)]

    def pick(u: float) -> str:
        acc = 0.0
        for name, w in zip(names, weights, strict=False):
            acc += w / sum(weights)
            if u < acc:
                return name
        return names[-1]

    def answer(req: Any) -> str:
        p = req.prompt
        if "You are analysing why a language model failed" in p:
            found = _NUM.findall(p)
            n = found[-1] if found else "none"
            u = _unit("noise", p)
            category = pick(_unit("item", n)) if u >= 0.3 else pick(_unit("other", p))
            return f"RATIONALE: synthetic label (the category follows item {n}).\nCATEGORY: {category}"
        if "Rewrite the question below" in p:
            q = p.split("Question:\n", 1)[1].split("\n\nReply with", 1)[0].strip()
            return "\n".join(f"{k}. {q.replace('однажды', w)}" for k, w in ((1, "как-то"), (2, "когда-то"), (3, "раз")))
        if "four-option quiz" in p:
            for letter, text in re.findall(r"^([A-D])\) (.*)$", p, re.M):
                if originals.get(text, 1) % 5 == 0:
                    return letter
            return "A"
        if "Beginning:" in p:
            prefix = p.split("Beginning:\n", 1)[1].strip()
            found = _NUM.findall(prefix)
            if found and int(found[0]) % 5 == 0:
                return ru_question(int(found[0]))[len(prefix):].strip()
            return "не знаю"
        return "и так далее"

    return answer


def _cli(tree: Path, args: list[str], env: dict[str, str]) -> int:
    done = subprocess.run([sys.executable, "-m", "cresowlve_core.cli", *args], cwd=str(tree),
                          env={**os.environ, **env, "PYTHONPATH": str(tree)}, check=False,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    tail = "\n".join(done.stdout.strip().splitlines()[-3:])
    print(f"  $ cresowlve {' '.join(args[:3])} … (exit {done.returncode})\n    " + tail.replace("\n", "\n    "),
          flush=True)
    return done.returncode


def seed_outputs(work: Path, url: str, max_items: int) -> None:
    env = {"CRESOWLVE_DATA_DIR": str(work / "data"), "CRESOWLVE_REPORTS_DIR": str(work / "reports")}
    for variant in VARIANTS:  # one label folder: err40 resumes it, labelling only the answers base lacks
        if (work / "errors" / f"labelled-{variant}").exists():
            continue
        _cli(REPO, ["errors", "label", "--runs", str(work / f"r-{variant}" / "*"), "--out-dir", str(work / "errors"),
                    "--labeller-model", LABELLER, "--labeller-base-url", url, "--max-tokens", str(LABEL_TOKENS)], env)
        (work / "errors" / f"labelled-{variant}").touch()
    for variant in VARIANTS:
        out = work / f"cont-{variant}"
        if (out / "summary.json").exists():
            continue
        if variant != "base":  # the shared perturbations and unchanged configurations resume
            shutil.copytree(work / "cont-base", out)
        _cli(REPO, ["contamination", "run", "--runs", str(work / f"r-{variant}" / "*"), "--out-dir", str(out),
                    "--perturber-model", PERTURBER, "--perturber-base-url", url, "--quiz-model", QUIZ,
                    "--quiz-base-url", url, "--max-items", str(max_items)], env)


def error_runs(work: Path, variant: str, edited: str, n_configs: int) -> list[str] | str:
    """04's runs: the edited configuration and the first others, ``n_configs`` in all (both
    languages each; 0: all 18). 04 tests every two configurations in a language with 2,000
    within-item permutations: 306 tests at 18, about 40 minutes on a loaded 2-core machine."""
    if n_configs <= 0:
        return str(work / f"r-{variant}" / "*")
    from cresowlve_core.analysis import load_runs

    runs = load_runs(str(work / f"r-{variant}" / "*")).runs
    keep = [edited, *[c for c in sorted(runs["config"].unique()) if c != edited][:n_configs - 1]]
    return sorted(str(p) for p in runs.loc[runs["config"].isin(keep), "path"])


def render(work: Path, tree: Path, variant: str, notebook: str, url: str, max_items: int,
           runs: list[str] | str) -> Path | None:
    tag = f"{tree.resolve().name}-{variant}"
    reports = work / f"reports-{tag}"
    out = work / f"out-{notebook[:2]}-{tag}"
    if not out.exists() and tree == REPO:
        shutil.copytree(work / ("errors" if notebook.startswith("04") else f"cont-{variant}"), out)
    if notebook.startswith("04"):
        params = {"runs": runs, "out_dir": str(out), "labeller_model": LABELLER, "labeller_base_url": url,
                  "limit": None, "max_tokens": LABEL_TOKENS, "make_demo": False}
    else:
        params = {"runs": str(work / f"r-{variant}" / "*"), "out_dir": str(out), "perturber_model": PERTURBER, "perturber_base_url": url,
                  "quiz_model": QUIZ, "quiz_base_url": url, "max_items_per_set": max_items,
                  "max_tokens": CONT_TOKENS, "make_demo": False}
    args = ["report", notebook, "--reports-dir", str(reports)]  # one folder per tree and variant (older trees lack --name)
    for k, v in params.items():
        args += ["-p", k, json.dumps(v) if not isinstance(v, str) else v]
    env = {"CRESOWLVE_DATA_DIR": str(work / f"data-{tag}"), "CRESOWLVE_REPORTS_DIR": str(reports)}
    if _cli(tree, args, env) != 0:
        return None
    found = sorted(reports.glob(f"{notebook}*.ipynb"))
    return found[0] if found else None


def _f(v: Any) -> str:
    return "–" if v is None else f"{v:.4g}" if isinstance(v, float) else str(v)


def _tally(nb: Path) -> list[dict[str, str]]:
    """04's tally table (one row per run: config, lang, basis, …) read from the executed notebook."""
    import html

    cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
    for cell in cells:
        for out in cell.get("outputs", []):
            text = "".join(out.get("data", {}).get("text/html", ""))
            if "judge_coverage" not in text or "n_to_label" not in text:
                continue
            heads = [html.unescape(re.sub(r"<[^>]+>", "", h)).strip() for h in re.findall(r"<th[^>]*>(.*?)</th>", text, re.S)]
            rows = []
            for tr in re.findall(r"<tr>(.*?)</tr>", text, re.S)[1:]:
                vals = [html.unescape(re.sub(r"<[^>]+>", "", v)).strip() for v in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)]
                rows.append(dict(zip(heads[-len(vals):], vals, strict=False)))
            return rows
    return []


def summarise(nb: Path, edited: str) -> None:
    """The numbers of the rendered notebook's records: 04's shares (with their unit), the χ² of
    the edited configuration against the others, the wrong basis; 05's verdicts with basis and Holm,
    the edited configuration's deciding rows."""
    from cresowlve_core.notebook_records import read_records

    rec = read_records(nb)
    print(f"  banners: {rec.get('banners', [])}")
    if "distribution" in rec:
        runs = rec.get("runs", {})
        print("  runs: " + ", ".join(f"{k}={runs.get(k, 'n/a')}" for k in
                                     ("n_runs", "n_wrong", "n_no_answer", "n_no_answer_error", "n_to_label", "n_no_item")))
        for t in _tally(nb):
            if t.get("config") == edited or t.get("lang") == "en" and t.get("config", "") < "D":
                print("  wrong basis " + ", ".join(f"{k}={t.get(k)}" for k in
                                                  ("config", "lang", "basis", "judge_coverage", "n_wrong", "n_no_answer")))
        dist = [d for d in rec["distribution"]["distribution"] if d.get("group", "").startswith(edited)]
        for d in sorted(dist, key=lambda d: (d.get("group", ""), -(d.get("p") or 0)))[:4]:
            print(f"  share {d.get('group')} {d.get('category')}: {_f(d.get('p'))} [{_f(d.get('low'))}, {_f(d.get('high'))}] "
                  f"k={d.get('k')} n={d.get('n')} n_items={d.get('n_items', 'n/a')} unit={d.get('unit', 'n/a')}")
        chi = rec["distribution"]["chi2"]
        tested = [c for c in chi if c.get("p") is not None]
        mine = [c for c in tested if edited in (str(c.get("a")), str(c.get("b"))) or edited in str(c.get("a", "")) + str(c.get("b", ""))]
        sig = sum((c.get("p_holm") if c.get("p_holm") is not None else c["p"]) < 0.05 for c in tested)
        print(f"  χ² pairs tested {len(tested)}, significant (Holm where given) {sig}")
        for c in mine[:3]:
            print("  χ² " + ", ".join(f"{k}={_f(c.get(k, 'n/a'))}" for k in
                                      ("a", "b", "chi2", "p", "p_holm", "n_shared_items", "test")))
    if "verdict" in rec:
        for config, v in sorted(rec["verdict"].items()):
            if config != edited and config != sorted(rec["verdict"])[0]:
                continue
            print(f"  verdict {config}: {v.get('overall')} | basis {v.get('basis', 'n/a')} | p_holm {_f(v.get('p_holm', 'n/a'))}")
            for row in v.get("rows", []):
                if any(s in str(row.get("test")) for s in ("matched", "wrong_both", "right_both", "overall")):
                    print("    " + ", ".join(f"{k}={_f(row.get(k, 'n/a'))}" for k in
                                             ("test", "n", "statistic", "low", "high", "p", "p_holm", "signal")))
        bases = {v.get("basis", "n/a") for v in rec["verdict"].values()}
        holm = [v.get("p_holm") for v in rec["verdict"].values()]
        print(f"  {len(rec['verdict'])} verdicts; bases {sorted(map(str, bases))}; p_holm given for "
              f"{sum(h is not None for h in holm)}")


def main() -> int:
    from fakeserver import FakeServer
    from validity import make_runs

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, required=True, help="the runs, seeded outputs and reports (kept)")
    ap.add_argument("--before", type=Path, action="append", default=[], help="an older tree to render with")
    ap.add_argument("--max-items", type=int, default=40, help="contamination: items per set and configuration")
    ap.add_argument("--error-configs", type=int, default=4, help="04: configurations rendered (0: all 18)")
    ap.add_argument("--only", choices=["04", "05"], default=None, help="render one notebook")
    ap.add_argument("--before-only", action="store_true", help="render with the --before trees only")
    ap.add_argument("--summarise", type=Path, default=None, help="only print the numbers of a rendered notebook")
    args = ap.parse_args()
    work = args.work.resolve()
    if args.summarise:
        summarise(args.summarise, json.loads((work / "meta.json").read_text(encoding="utf-8"))["config"])
        return 0
    work.mkdir(parents=True, exist_ok=True)
    meta = make_runs(work)
    items = write_items(work)
    for variant in VARIANTS:
        runs_with_items(work, variant, items)
    with FakeServer(answers=synthetic_model(), model="synthetic") as srv:
        seed_outputs(work, srv.base_url, args.max_items)
        print(f"seeded: {srv.total} calls to the synthetic endpoint", flush=True)
        notebooks = [n for n in ("04_error_analysis", "05_contamination") if args.only is None or n.startswith(args.only)]
        for tree in [*args.before, *([] if args.before_only else [REPO])]:
            for notebook in notebooks:
                for variant in VARIANTS:
                    before = srv.total
                    nb = render(work, tree.resolve(), variant, notebook, srv.base_url, args.max_items,
                                error_runs(work, variant, meta["config"], args.error_configs))
                    print(f"# {notebook} on {variant} with {tree}: {nb or 'render failed'} "
                          f"({srv.total - before} calls sent while rendering)", flush=True)
                    if nb is not None:
                        summarise(nb, meta["config"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
