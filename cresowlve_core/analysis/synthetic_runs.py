"""Synthetic evaluation run directories — for tests and the benchmark ONLY, never results.

:func:`write_synthetic_runs` writes one run directory per model configuration × language,
in exactly the format of :mod:`cresowlve_core.evaluation.records`, with random predictions:

* items: ``n_items`` ids shared by every run, difficulty 1–5 in the published proportions,
  about 15 % annotated ``factual`` (the paper's 352 of 2,413), knowledge domains, creative
  concepts and cultures drawn from label sets named in the paper (Zipf-like frequencies),
  and a number of atomic facts;
* correctness: per configuration a base accuracy drawn at random, lowered with difficulty,
  raised for factual items, plus a shared per-item easiness; the judge verdict is the
  latent truth, lenient exact match is a noisy subset of it, strict a subset of lenient;
* a few model errors, unscored judge calls, re-judged records (``extra.judge_repeat``)
  and configurations with an unknown price (``cost: null``).

Every record and manifest carries ``synthetic: true``; the analysis shows a banner for them.
Write them under a temporary directory or ``data/runs/synthetic`` (git-ignored).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cresowlve_core.jsonl import dumps_lines
from cresowlve_core.outfiles import dumps_json
from cresowlve_core.runtime.rundir import RESPONSES
from cresowlve_core.text import slug

PAPER_CONFIGS: list[tuple[str, str | None, bool]] = [
    ("OLMo-2-32B-Instruct", None, False),
    ("C4AI-command-a", None, False),
    ("Llama-3.3-70B-Instruct", None, False),
    ("Mistral-Large-3-675B-Instruct", None, False),
    ("Qwen3-235B-A22B-Instruct", None, False),
    ("GPT-4.1-mini", None, False),
    ("GPT-4.1", None, False),
    ("Qwen3.5-397B-A17B", "adaptive", True),
    ("Qwen3-235B-A22B-Thinking", "adaptive", True),
    ("DeepSeek-V3.2", "adaptive", True),
    ("GLM-5", "adaptive", True),
    ("GPT-5.4", "none", True),
    ("GPT-5.4", "medium", True),
    ("Gemini-3-Flash", "minimal", True),
    ("Gemini-3-Flash", "medium", True),
    ("Gemini-3.1-Pro", "low", True),
    ("Gemini-3.1-Pro", "medium", True),
    ("Gemini-3.1-Pro", "high", True),
]

KNOWLEDGE_DOMAINS = [
    "Literature",
    "History",
    "Film & Media Studies",
    "Languages & Linguistics",
    "Music",
    "Visual Arts",
    "Religion & Mythology",
    "Geography",
    "Politics & Law",
    "Sports & Games",
    "Biology",
    "Physics",
    "Chemistry",
    "Mathematics",
    "Astronomy",
    "Earth & Environmental Sciences",
    "Medicine & Health",
    "Economics & Business",
    "Philosophy",
    "Psychology",
    "Technology & Engineering",
    "Computer Science",
    "Architecture",
    "Food & Cuisine",
    "Fashion & Design",
    "Military History",
    "Theatre & Performing Arts",
    "Popular Culture",
    "Sociology & Anthropology",
    "Education",
    "Transportation",
    "Agriculture",
    "Folklore",
    "Journalism",
]  # 34 coarse domains, as in the paper (§3.2)
CREATIVE_CONCEPTS = [
    "lateral thinking",
    "abstraction",
    "analogy",
    "metaphor",
    "pun",
    "joke",
    "commonsense",
    "poem",
    "idiom",
    "wordplay",
    "allusion",
    "irony",
    "symbolism",
]
CULTURES = [
    "Russian",
    "English",
    "American",
    "French",
    "German",
    "Italian",
    "Greek",
    "Japanese",
    "Latin",
    "Spanish",
    "Chinese",
    "Jewish",
    "Arabic",
    "Polish",
    "Scandinavian",
    "Dutch",
    "Indian",
    "Universal",
]
DIFFICULTY_COUNTS = {1: 417, 2: 453, 3: 436, 4: 371, 5: 384}
FACTUAL_SHARE = 352 / 2413

_NONE = np.array(None, dtype=object)  # None for np.where (whose stubs refuse a bare None); same object result


def _configs(n: int) -> list[tuple[str, str | None, bool]]:
    """The paper's 18 configurations, repeated with a version suffix beyond 18."""
    out = []
    for i in range(n):
        model, effort, thinking = PAPER_CONFIGS[i % len(PAPER_CONFIGS)]
        if i >= len(PAPER_CONFIGS):
            model = f"{model}-v{i // len(PAPER_CONFIGS) + 1}"
        out.append((model, effort, thinking))
    return out


def _label_sets(rng: np.random.Generator, labels: Sequence[str], n: int, k_probs: Sequence[float]) -> list[list[str]]:
    """``n`` label sets without repetition; sizes from ``k_probs`` (for 1, 2, ... labels).

    Gumbel top-k over Zipf-like weights gives weighted sampling without replacement for all
    items at once.
    """
    weights = 1.0 / np.arange(1, len(labels) + 1) ** 0.9
    keys = np.log(weights)[None, :] + rng.gumbel(size=(n, len(labels)))
    order = np.argsort(-keys, axis=1)
    sizes = rng.choice(np.arange(1, len(k_probs) + 1), size=n, p=np.asarray(k_probs) / np.sum(k_probs))
    names = np.asarray(labels, dtype=object)
    return [names[order[i, : sizes[i]]].tolist() for i in range(n)]


def synthetic_items(n_items: int, seed: int = 0) -> pd.DataFrame:
    """The item table shared by every synthetic run (annotations, difficulty, easiness)."""
    rng = np.random.default_rng([seed, 1])
    levels = np.array(list(DIFFICULTY_COUNTS))
    share = np.array(list(DIFFICULTY_COUNTS.values()), dtype=float)
    return pd.DataFrame(
        {
            "id": [f"synthetic_{i:05d}" for i in range(n_items)],
            "difficulty": rng.choice(levels, size=n_items, p=share / share.sum()),
            "reasoning_type": np.where(rng.random(n_items) < FACTUAL_SHARE, "factual", "creative"),
            "knowledge_domains": _label_sets(rng, KNOWLEDGE_DOMAINS, n_items, [0.15, 0.35, 0.3, 0.2]),
            "creative_domains": _label_sets(rng, CREATIVE_CONCEPTS, n_items, [0.25, 0.45, 0.25, 0.05]),
            "cultures": _label_sets(rng, CULTURES, n_items, [0.45, 0.4, 0.15]),
            "n_atomic_facts": rng.integers(1, 7, size=n_items),
            "easiness": rng.normal(0.0, 0.8, size=n_items),
        }
    )


def _usage(inp: np.ndarray, out: np.ndarray, reasoning: np.ndarray | None) -> list[dict[str, Any]]:
    r = [None] * len(inp) if reasoning is None else reasoning.tolist()
    return [
        {"input_tokens": a, "output_tokens": b, "reasoning_tokens": c}
        for a, b, c in zip(inp.tolist(), out.tolist(), r, strict=True)
    ]


def _run_records(
    items: pd.DataFrame,
    rng: np.random.Generator,
    model: str,
    effort: str | None,
    thinking: bool,
    lang: str,
    base_logit: float,
    price: float | None,
    judge: bool,
    annotations: bool,
    atomic_facts: bool,
    judge_repeat_share: float,
) -> pd.DataFrame:
    n = len(items)
    factual = items["reasoning_type"].eq("factual").to_numpy()
    logit = (
        base_logit
        + rng.normal(0.0, 0.25)
        + items["easiness"].to_numpy()
        - 0.45 * (items["difficulty"].to_numpy() - 3)
        + 0.6 * factual
    )
    truth = rng.random(n) < 1.0 / (1.0 + np.exp(-logit))
    lenient = np.where(truth, rng.random(n) < 0.65, rng.random(n) < 0.02)
    strict = lenient & (rng.random(n) < 0.85)
    error = rng.random(n) < 0.005
    unscored = ~error & (rng.random(n) < 0.02)
    verdict = np.where(truth, "CORRECT", "INCORRECT").astype(object)
    if judge:
        verdict[error | unscored] = None
        judge_status = np.where(error, "not_run", np.where(unscored, "unscored", "scored"))
    else:
        verdict[:] = None
        judge_status = np.full(n, "not_run")
    inp = rng.integers(120, 320, size=n)
    out = rng.integers(20, 900, size=n)
    reasoning = rng.integers(300, 6000, size=n) if thinking else None
    toks = out + (reasoning if reasoning is not None else 0)
    cost = (inp * price / 4 + toks * price) / 1e6 if price is not None else None
    repeat = np.full(n, None, dtype=object)
    if judge:
        again = (judge_status == "scored") & (rng.random(n) < judge_repeat_share)
        flip = rng.random(n) < 0.05
        rep_correct = truth ^ flip
        repeat[again] = np.where(rep_correct[again], "CORRECT", "INCORRECT")
    empty: list[list[str]] = [[] for _ in range(n)]
    rec = pd.DataFrame(
        {
            "id": items["id"],
            "lang": lang,
            "status": np.where(error, "error", "ok"),
            "error": np.where(error, "synthetic API error", _NONE),
            "model": model,
            "effort": effort,
            "difficulty": items["difficulty"],
            "reasoning_type": items["reasoning_type"],
            "knowledge_domains": items["knowledge_domains"] if annotations else empty,
            "creative_domains": items["creative_domains"] if annotations else empty,
            "cultures": items["cultures"] if annotations else empty,
            "n_atomic_facts": items["n_atomic_facts"] if atomic_facts else None,
            "answer": "synthetic answer",
            "prediction": np.where(error, _NONE, np.where(truth, "synthetic answer", "something else")),
            "usage": _usage(inp, out, reasoning),
            "cost": cost if cost is not None else None,
            "cached": False,
            "em_strict": np.where(error, _NONE, strict).astype(object),
            "em_lenient": np.where(error, _NONE, lenient).astype(object),
            "judge_status": judge_status,
            "judge_verdict": verdict,
            "judge_model": "synthetic-judge" if judge else None,
            "judge_usage": _usage(inp + 150, np.full(n, 3), None) if judge else None,
            "judge_cost": ((inp + 150) * 2.5 / 1e6) if judge else None,
            "synthetic": True,
            "extra": [{"judge_repeat": r} if r is not None else {} for r in repeat.tolist()],
        }
    )
    return rec


def write_synthetic_runs(
    out_dir: str | Path,
    n_items: int = 2061,
    configs: int = 18,
    seed: int = 0,
    *,
    langs: Sequence[str] = ("en", "ru"),
    judge: bool = True,
    annotations: bool = True,
    atomic_facts: bool = True,
    judge_repeat_share: float = 0.1,
) -> list[Path]:
    """Write ``configs × len(langs)`` synthetic run directories under ``out_dir``.

    ``judge=False`` leaves every record ``not_run`` with no judge in the manifest;
    ``annotations=False`` leaves domains, concepts and cultures empty; ``atomic_facts=False``
    leaves ``n_atomic_facts`` null. Returns the run directories in creation order.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    items = synthetic_items(n_items, seed)
    rng = np.random.default_rng([seed, 2])
    written: list[Path] = []
    for ci, (model, effort, thinking) in enumerate(_configs(configs)):
        base_acc = rng.uniform(0.06, 0.75)
        base_logit = float(np.log(base_acc / (1 - base_acc)))
        price = None if ci % 6 == 5 else float(rng.choice([0.4, 2.0, 8.0, 15.0]))
        for lang in langs:
            run_rng = np.random.default_rng([seed, 3, ci, 0 if lang == "en" else 1])
            run_id = f"synthetic__{slug(model)}__{effort or 'default'}__{lang}"
            d = out / run_id
            d.mkdir(parents=True, exist_ok=True)
            records = _run_records(
                items,
                run_rng,
                model,
                effort,
                thinking,
                lang,
                base_logit,
                price,
                judge,
                annotations,
                atomic_facts,
                judge_repeat_share,
            )
            (d / RESPONSES).write_text(dumps_lines(records.to_dict("records")), encoding="utf-8")
            manifest = {
                "run_id": run_id,
                "kind": "eval",
                "model": model,
                "base_url": "synthetic://",
                "effort": effort,
                "thinking": thinking,
                "lang": lang,
                "items": f"synthetic:{n_items}",
                "n_items": n_items,
                "seed": seed,
                "judge": {"model": "synthetic-judge", "prompt_version": "synthetic"} if judge else None,
                "started_at": "2000-01-01T00:00:00+00:00",
                "finished_at": "2000-01-01T00:00:01+00:00",
                "synthetic": True,
            }
            (d / "manifest.json").write_text(dumps_json(manifest) + "\n", encoding="utf-8")
            written.append(d)
    return written
