"""The contamination pipeline end to end against the fake server: sets, perturbations, both
quizzes, the completion test, the verdict, and resume without resending."""

from __future__ import annotations

import json
import re
from pathlib import Path

from fakeserver import FakeServer

from cresowlve_core.analysis.loading import load_runs
from cresowlve_core.analysis.paired import en_ru_items
from cresowlve_core.contamination.pipeline import Role, run_contamination
from cresowlve_core.contamination.select import paired_sets
from cresowlve_core.contamination.verdict import verdict_table
from cresowlve_core.items import Item, ItemView

N_TARGET, N_WRONG, N_RIGHT = 8, 3, 2


def ru_question(i: int) -> str:
    return f"Вопрос номер {i}: этот знаменитый учёный однажды сказал, что ИКС важнее знания. Назовите ИКС."


def make_items() -> list[Item]:
    n = N_TARGET + N_WRONG + N_RIGHT + 1  # the last one gets unusable perturbations
    return [Item(id=f"chgk_{i:010x}", en=ItemView(question=f"Puzzle {i}: who?", answer=f"A{i}"),
                 ru=ItemView(question=ru_question(i), answer=f"О{i}")) for i in range(n)]


def write_runs(root: Path, items: list[Item]) -> None:
    items_path = root / "items.jsonl"
    items_path.write_text("".join(json.dumps(it.model_dump(), ensure_ascii=False) + "\n" for it in items))
    for lang in ("en", "ru"):
        d = root / "runs" / f"m__{lang}"
        d.mkdir(parents=True)
        (d / "manifest.json").write_text(json.dumps({
            "run_id": d.name, "kind": "eval", "model": "m", "base_url": "http://127.0.0.1:1/v1", "lang": lang,
            "items": str(items_path), "n_items": len(items), "finished_at": "2026-01-01T00:00:00Z"}))
        lines = []
        for i, it in enumerate(items):
            target = i < N_TARGET or i == len(items) - 1
            right = (lang == "ru" and target) or N_TARGET + N_WRONG <= i < N_TARGET + N_WRONG + N_RIGHT
            lines.append(json.dumps({"id": it.id, "lang": lang, "status": "ok", "model": "m", "prediction": "x",
                                     "em_strict": right, "em_lenient": right}))
        (d / "responses.jsonl").write_text("\n".join(lines) + "\n")


def fake_model(items: list[Item]):
    """A quiz-taker that has memorised the target questions (and nothing else)."""
    originals = {" ".join(ru_question(i).split()): i for i in range(len(items))}

    def answer(req) -> str:
        p = req.prompt
        if "Rewrite the question below" in p:
            q = p.split("Question:\n", 1)[1].split("\n\nReply with", 1)[0].strip()
            if q.startswith(f"Вопрос номер {len(items) - 1}:"):
                return "I will not do that."
            return "\n".join(f"{k}. {q.replace('однажды', w)}" for k, w in ((1, "как-то"), (2, "когда-то"), (3, "раз")))
        if "four-option quiz" in p:
            opts = dict(re.findall(r"^([A-D])\) (.*)$", p, re.M))
            for letter, text in opts.items():
                if text in originals and originals[text] < N_TARGET:
                    return letter  # recognises a memorised original
            return "A" if "Вопрос номер 1:" not in p else "the first one, I guess"  # position bias; one invalid
        if "Beginning:" in p:  # guided completion
            prefix = p.split("Beginning:\n", 1)[1].strip()
            i = int(prefix.split("номер ")[1].split(":")[0])
            full = ru_question(i)
            return full[len(prefix):].strip() if i < N_TARGET else "не знаю"
        return "и так далее"  # general completion

    return answer


def test_sets_from_paired_runs(tmp_path):
    items = make_items()
    write_runs(tmp_path, items)
    members, counts = paired_sets(load_runs(str(tmp_path / "runs" / "*")))
    row = counts.iloc[0]
    assert (row["target"], row["wrong_both"], row["right_both"]) == (N_TARGET + 1, N_WRONG, N_RIGHT)
    # the analysis's En x Ru cells under the same per-item rule give the same target set
    target = sorted(members.loc[members["set"] == "target", "id"])
    cells = en_ru_items(load_runs(str(tmp_path / "runs" / "*")), members["model"].iloc[0], metric="judge_else_em")
    assert cells["ru_right_en_wrong"] == target and len(target) == N_TARGET + 1


def test_pipeline_end_to_end_then_resume_sends_nothing(tmp_path):
    items = make_items()
    write_runs(tmp_path, items)
    role = Role("fake", None, None)
    with FakeServer(answers=fake_model(items)) as srv:
        role = Role("fake", srv.base_url)
        kw = dict(out_dir=tmp_path / "out", perturber=role, quiz_taker=role, make_demo=False)
        c = run_contamination(str(tmp_path / "runs" / "*"), **kw)
        first = srv.total
        n_quizzable = N_TARGET + N_WRONG + N_RIGHT
        # perturb all 14, BDQ 13, BCQ 13 x 3, completion 14 x 2
        assert first == 14 + n_quizzable + 3 * n_quizzable + 2 * 14
        srv.reset()
        again = run_contamination(str(tmp_path / "runs" / "*"), **kw)
        assert srv.total == 0  # everything was already done
    (r,) = c.results
    assert r.not_quizzable["reason"].tolist() == ["no three numbered rewrites in the reply"]
    assert r.rejections[["id", "rewrite", "kind"]].values.tolist() == [[items[-1].id, 0, "unparsed"]]
    assert r.bdq_counts["A"] == n_quizzable - 1 and r.bdq_counts["invalid"] == 1
    assert r.non_preferred == ["B", "C"] and r.truly_non_preferred
    tgt = r.bcq[r.bcq["set"] == "target"]
    assert len(tgt) == 3 * N_TARGET and (tgt["choice"] == tgt["correct"]).all()
    assert set(tgt["correct"]) <= {"B", "C"}
    ctrl = r.bcq[r.bcq["set"] == "wrong_both"]
    assert not (ctrl["choice"] == ctrl["correct"]).any()
    guided = r.completions[(r.completions["mode"] == "guided") & (r.completions["set"] == "target")
                           & (r.completions["id"] != items[-1].id)]  # the last one is not memorised
    assert (guided["rouge_l"] == 1.0).all() and guided["prefix_match"].all()
    v = verdict_table(r)
    assert v.iloc[-1]["test"] == "overall" and v.iloc[-1]["reading"].startswith("likely contaminated")
    assert (v[v["test"].str.startswith("BCQ accuracy")]["p"] < 1e-6).all()
    assert again.results[0].bcq.shape == r.bcq.shape


def test_one_signal_alone_is_never_contamination(tmp_path):
    items = make_items()
    write_runs(tmp_path, items)
    base = fake_model(items)

    def no_completion(req):  # recognises originals in the quiz, but cannot continue them
        if "Beginning:" in req.prompt:
            return "не знаю"
        return base(req)

    with FakeServer(answers=no_completion) as srv:
        role = Role("fake", srv.base_url)
        c = run_contamination(str(tmp_path / "runs" / "*"), out_dir=tmp_path / "out", perturber=role,
                              quiz_taker=role, make_demo=False)
    v = verdict_table(c.results[0])
    assert v.iloc[-1]["reading"].startswith("inconclusive")
    assert not v.iloc[-1]["signal"]


def test_nothing_tested_is_said_plainly():
    import pandas as pd

    from cresowlve_core.contamination.pipeline import ConfigResult

    empty = ConfigResult("m", {"target": 0, "wrong_both": 2, "right_both": 0},
                         pd.DataFrame(columns=["set", "id", "reason"]), [], pd.DataFrame(columns=["set", "id", "choice"]),
                         {"A": 0, "B": 0, "C": 0, "D": 0, "invalid": 0}, [], False,
                         pd.DataFrame(columns=["set", "id", "repeat", "choice", "correct"]),
                         pd.DataFrame(columns=["set", "id", "mode", "rouge_l", "prefix_match", "continuation"]))
    v = verdict_table(empty)
    assert v.iloc[-1]["reading"].startswith("not tested") and not v.iloc[-1]["signal"]
    assert v.iloc[0]["reading"].startswith("no valid BDQ answers")
