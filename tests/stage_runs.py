"""Every model-calling stage (and the grid), run in-process against one local fake server.

Shared by the tests that must hold for *every* stage: line separators in answers
(``test_every_stage_io.py``) and credentials in base URLs. Each ``run_*`` function takes the
server, the base URL to give the stage (it may carry credentials the server ignores), and a
temporary directory; it returns ``(exit code, output directory)``. The scripted answers are the
stages' own test fakes, optionally passed through ``wrap`` (see :func:`answers_with`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

TESTS = Path(__file__).resolve().parent
for sub in ("construction", "contamination", "create", "error_analysis", "evaluation", "synthetic"):
    if not (TESTS / sub).is_dir():
        raise RuntimeError(f"tests/{sub} is gone: update the stage folders stage_runs puts on sys.path")
    if str(TESTS / sub) not in sys.path:
        sys.path.append(str(TESTS / sub))

from cresowlve_core.cli import main  # noqa: E402
from cresowlve_core.items import Item, ItemView  # noqa: E402

Answers = Callable[[Any], Any]


def answers_with(answers: Answers, suffix: str) -> Answers:
    """``answers`` with ``suffix`` appended to every text reply (on a line of its own)."""

    def reply(req: Any) -> Any:
        out = answers(req)
        return f"{out}\n{suffix}" if isinstance(out, str) else out

    return reply


# --------------------------------------------------------------------------- eval


def eval_items() -> list[Item]:
    return [Item(id=f"chgk_{i:010x}", en=ItemView(question=f"Puzzle number {i}: who is X?", answer=f"Answer{i}"))
            for i in range(4)]


def eval_answers(req: Any) -> str:
    if "candidate_answer" in req.prompt:
        nonce = req.prompt.rsplit("VERDICT-", 1)[1].split(":")[0]
        return f"Looks right.\nVERDICT-{nonce}: CORRECT"
    n = int(req.prompt.split("Puzzle number ")[1].split(":")[0])
    return f"Thinking...\n<Answer>Answer{n}</Answer>"


def write_items(path: Path, items: list[Item]) -> Path:
    path.write_text("".join(json.dumps(it.model_dump(), ensure_ascii=False) + "\n" for it in items), encoding="utf-8")
    return path


def run_eval(base_url: str, tmp: Path, *extra: str) -> tuple[int, Path]:
    items = write_items(tmp / "eval_items.jsonl", eval_items())
    out = tmp / "eval_run"
    code = main(["eval", "--model", "fake-model", "--base-url", base_url, "--items", str(items), "--lang", "en",
                 "--run-dir", str(out), "--judge-model", "fake-judge", "--judge-base-url", base_url,
                 "--max-tokens", "64", "--concurrency", "2", *extra])
    return code, out


# --------------------------------------------------------------------------- CREATE


def run_create(base_url: str, tmp: Path, queries: Path | None = None) -> tuple[int, Path]:
    """``create generate`` (2 queries); scoring needs the sentence embedder, so it is run through
    the library with a one-hot embedder by :func:`run_create_score`."""
    out = tmp / "create_run"
    args = ["create", "generate", "--model", "fake-model", "--base-url", base_url, "--limit", "2",
            "--max-tokens", "512", "--run-dir", str(out)]
    if queries is not None:
        args += ["--queries", str(queries)]
    return main(args), out


def run_create_score(base_url: str, run_dir: Path) -> Any:
    from create_fakes import one_hot

    from cresowlve_core.create import score as cs
    from cresowlve_core.llm.types import Endpoint

    return cs.score(run_dir, Endpoint(base_url, "fake-judge"), embedder=one_hot, progress=False)


def create_answers(req: Any) -> str:
    from create_fakes import server_reply

    return server_reply(req)


# --------------------------------------------------------------------------- construction


def run_build(base_url: str, tmp: Path) -> tuple[int, Path]:
    from test_construction_pipeline import DEMO

    out = tmp / "build"
    code = main(["build", "--source", DEMO, "--model", "fake", "--base-url", base_url, "--build-dir", str(out),
                 "--agreement-n", "3"])
    return code, out


def build_answers(req: Any) -> str:
    from test_construction_pipeline import scripted

    return scripted(req)


# --------------------------------------------------------------------------- errors


def run_errors(base_url: str, tmp: Path) -> tuple[int, Path]:
    from test_errors_label import _items, write_run

    items = _items(4)
    (tmp / "err_runs").mkdir(exist_ok=True)
    write_run(tmp / "err_runs", "en", items, {it.id: False for it in items})
    out = tmp / "errors_out"
    code = main(["errors", "label", "--runs", str(tmp / "err_runs" / "*"), "--out-dir", str(out),
                 "--labeller-model", "fake-labeller", "--labeller-base-url", base_url, "--concurrency", "2"])
    return code, out


def errors_answers(req: Any) -> str:
    return "RATIONALE: r\nCATEGORY: Overthinking"


# --------------------------------------------------------------------------- contamination


def run_contamination(base_url: str, tmp: Path) -> tuple[int, Path]:
    from test_contamination_pipeline import make_items, write_runs

    root = tmp / "contam"
    if not root.exists():
        root.mkdir()
        write_runs(root, make_items())
    out = tmp / "contam_out"
    code = main(["contamination", "run", "--runs", str(root / "runs" / "*"), "--out-dir", str(out),
                 "--perturber-model", "fake", "--perturber-base-url", base_url, "--quiz-model", "fake",
                 "--quiz-base-url", base_url, "--max-items", "4"])
    return code, out


def contamination_answers() -> Answers:
    from test_contamination_pipeline import fake_model, make_items

    return fake_model(make_items())


# --------------------------------------------------------------------------- synth


def run_synth(base_url: str, tmp: Path) -> tuple[int, Path]:
    """The synthetic build on the tiny test graph, through the library (the CLI reads the shipped KG)."""
    from test_synth_pipeline import cfg, graph

    from cresowlve_core.llm.types import Endpoint
    from cresowlve_core.synthetic.pipeline import run_synth as synth

    ep = Endpoint(base_url, "fake")
    conf = cfg(tmp, "synth").model_copy(update={"verbaliser_base_url": base_url, "solver_base_url": base_url,
                                                "verbaliser_model": "fake", "solver_model": "fake"})
    res = synth(conf, source=graph(), endpoints=(ep, ep), progress=False)
    return (3 if res.stopped else 0), tmp / "synth"


def synth_answers(req: Any) -> str:
    from test_synth_pipeline import answers

    return answers(req)


# --------------------------------------------------------------------------- grid


def run_grid(base_url: str, tmp: Path) -> tuple[int, Path]:
    conf = {"name": "canary", "items": "demo", "langs": ["en"], "limit": 2, "parallel": 1,
            "runs_dir": str(tmp / "grid"), "report": False,
            "options": {"concurrency": 2, "max_tokens": 32},
            "judge": {"model": "fake-judge", "base_url": base_url},
            "models": [{"model": "model-a", "base_url": base_url}]}
    path = tmp / "grid.yaml"
    path.write_text(yaml.safe_dump(conf))
    return main(["grid", str(path)]), tmp / "grid"


def grid_answers(req: Any) -> str:
    if "candidate_answer" in req.prompt:
        nonce = req.prompt.rsplit("VERDICT-", 1)[1].split(":")[0]
        return f"Close enough.\nVERDICT-{nonce}: CORRECT"
    return "<Answer>Copernicus</Answer>"


def files_under(*dirs: Path) -> list[Path]:
    return sorted(p for d in dirs if d.exists() for p in d.rglob("*") if p.is_file())
