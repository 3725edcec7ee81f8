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

DID_TEST = "Completion guided − general ROUGE-L: target − wrong_both (difference in differences)"
N_TARGET, N_WRONG, N_RIGHT = 22, 21, 20  # the signals need at least MIN_ITEMS = 20 items per set (both controls decide)


def ru_question(i: int) -> str:
    return f"Вопрос номер {i}: этот знаменитый учёный однажды сказал, что ИКС важнее знания. Назовите ИКС."


def make_items() -> list[Item]:
    n = N_TARGET + N_WRONG + N_RIGHT + 1  # the last one gets unusable perturbations
    return [Item(id=f"chgk_{i:010x}", difficulty=1 + i % 3, en=ItemView(question=f"Puzzle {i}: who?", answer=f"A{i}"),
                 ru=ItemView(question=ru_question(i), answer=f"О{i}")) for i in range(n)]


def default_sets(n: int) -> list[str]:
    """N_TARGET targets, N_WRONG wrong in both, N_RIGHT right in both, the last item a target."""
    return ["target" if i < N_TARGET or i == n - 1 else "wrong_both" if i < N_TARGET + N_WRONG else "right_both"
            for i in range(n)]


def write_runs(root: Path, items: list[Item], sets: list[str] | None = None) -> None:
    """En and Ru runs of model ``m`` (strict EM only) putting item i into ``sets[i]``."""
    sets = sets or default_sets(len(items))
    items_path = root / "items.jsonl"
    items_path.write_text("".join(json.dumps(it.model_dump(), ensure_ascii=False) + "\n" for it in items))
    for lang in ("en", "ru"):
        d = root / "runs" / f"m__{lang}"
        d.mkdir(parents=True)
        (d / "manifest.json").write_text(json.dumps({
            "run_id": d.name, "kind": "eval", "model": "m", "base_url": "http://127.0.0.1:1/v1", "lang": lang,
            "items": str(items_path), "n_items": len(items), "finished_at": "2026-01-01T00:00:00Z"}))
        lines = []
        for it, s in zip(items, sets, strict=True):
            right = (lang == "ru" and s == "target") or s == "right_both"
            lines.append(json.dumps({"id": it.id, "lang": lang, "status": "ok", "model": "m", "prediction": "x",
                                     "em_strict": right, "em_lenient": right, "difficulty": it.difficulty}))
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
        n_all = n_quizzable + 1
        # perturb all, BDQ the quizzable, BCQ the quizzable x 3, completion all x 2
        assert first == n_all + n_quizzable + 3 * n_quizzable + 2 * n_all
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
    assert r.basis == "em_strict" and r.judge_coverage == {"en": 0.0, "ru": 0.0}  # no judge in these runs
    v = verdict_table(r, n_boot=200).set_index("test")
    assert v.loc["overall", "reading"].startswith("likely contaminated")
    # the completion test also has the target item whose perturbations failed
    assert v.loc["overall", "sets"].startswith(f"target (n = {N_TARGET + 1}) vs wrong_both (n = {N_WRONG}), "
                                               "matched on difficulty (levels 1, 2, 3)")
    maj = v.loc["BCQ target: items right in a majority of repeats (exact binomial vs 25%)"]
    assert (maj["n"], maj["statistic"]) == (N_TARGET, 1.0) and maj["p"] < 1e-6  # 22 items, not 66 trials
    diff = v.loc["BCQ per-item accuracy, target − wrong_both"]
    assert (diff["low"], diff["high"]) == (1.0, 1.0) and "zero width" in diff["reading"]  # decided by p alone
    assert diff["p"] == 1 / 201 and diff["signal"]
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
    assert v.iloc[-1]["reading"] == ("not tested: too few items (n = 0; at least 20 per set): no target item reached "
                                     "the quiz or the completion test")
    assert v.iloc[-1]["signal"] is None
    assert v.set_index("test").loc[DID_TEST, "reading"] == "too few items (n = 0): not tested"
    assert v.iloc[0]["reading"].startswith("no valid BDQ answers")


def refused_quiz_taker(tmp_path, monkeypatch, fraction: float, **settings):
    """A contamination run whose quiz-taker (behind the replay server, scenario refusal) gets OpenAI's
    recorded refusal for ``fraction`` of its prompts; the perturber is the fake model."""
    from replay.server import ReplayServer

    items = make_items()
    write_runs(tmp_path, items)
    monkeypatch.setenv("REPLAY_KEY", "replay-test-key")
    with FakeServer(answers=fake_model(items)) as fake, ReplayServer("refusal", refusal_fraction=fraction) as replay:
        return run_contamination(str(tmp_path / "runs" / "*"), out_dir=tmp_path / "out", make_demo=False,
                                 perturber=Role("fake", fake.base_url),
                                 quiz_taker=Role("gpt-4o-mini", replay.base_url("openai"), "REPLAY_KEY"), **settings)


def test_a_refused_quiz_answer_is_counted_withheld_not_invalid(tmp_path, monkeypatch):
    """The quiz-taker behind the replay server gets OpenAI's recorded refusal
    (``openai/chat_gpt4o_refusal``) for half its prompts; its other replies carry no option letter.
    The BDQ counts and the BCQ table called every refusal ``invalid``, as if the model had answered
    in a form the parser missed (the quiz step's own summary counts them apart)."""
    from cresowlve_core.contamination.quiz import bcq_table

    (r,) = refused_quiz_taker(tmp_path, monkeypatch, 0.5, max_items_per_set=4, n_repeats=1).results
    refused = int((r.bdq["outcome"] == "refused").sum())
    assert 0 < refused < len(r.bdq) and r.bdq["choice"].isna().all()
    assert r.bdq_counts == {"A": 0, "B": 0, "C": 0, "D": 0, "invalid": len(r.bdq) - refused, "withheld": refused,
                            "cut_off": 0}
    summary = json.loads((tmp_path / "out" / "m" / "gpt-4o-mini" / "bdq" / "summary.json").read_text())
    assert (summary["n_refused"], summary["n_invalid"]) == (refused, len(r.bdq) - refused)
    items_row = bcq_table(r.bcq, 1).set_index(["set", "repeat"]).loc[("target", "items")]
    target = r.bcq[r.bcq["set"] == "target"]
    assert items_row["withheld"] == (target["outcome"] == "refused").sum()
    assert items_row["invalid"] + items_row["withheld"] == len(target)


def test_a_quiz_taker_that_refuses_everything_gives_no_verdict_of_no_evidence(tmp_path, monkeypatch):
    """Every quiz question and continuation gets OpenAI's recorded refusal (replay scenario refusal,
    refusal_fraction 1.0). Refusals counted as wrong choices and empty continuations made "0 of 22
    items right ... not above chance" and "overall: no evidence of contamination from these tests":
    a verdict from answers never given. A refusal is no answer: no test, and the reading says why."""
    (r,) = refused_quiz_taker(tmp_path, monkeypatch, 1.0).results
    assert (r.bcq["outcome"] == "refused").all() and len(r.bcq) == 3 * (N_TARGET + N_WRONG + N_RIGHT)
    v = verdict_table(r, n_boot=50).set_index("test")
    assert v.loc["overall", "signal"] is None
    assert v.loc["overall", "reading"].startswith("not tested: too few items (n = 0; at least 20 per set)")
    assert v.loc["overall", "reading"].endswith(
        f"left out as no answer: {len(r.bcq)} BCQ answer(s), {len(r.completions)} continuation(s) refused or filtered")
    assert v.loc[DID_TEST, "n"] == 0 and v.loc["BCQ per-item accuracy, target − wrong_both", "n"] == 0


def test_refused_bdq_replies_are_not_in_the_n_of_the_non_preferred_threshold(tmp_path):
    """A position is non-preferred when chosen fewer than N/4 times, N the answers (invalid ones
    included, as the paper's k/4). N counted the refused replies too: 16 refusals of 63 replies raised
    N/4 from 11.75 to 15.75, and B, chosen 13 times of 47 answers, became 'non-preferred'. The
    refusal is OpenAI's documented shape (content null, message.refusal) with the recorded text of
    tests/replay/fixtures/openai/chat_gpt4o_refusal.json."""
    import threading

    from fakeserver import Reply

    items = make_items()
    write_runs(tmp_path, items)
    originals = {" ".join(ru_question(i).split()) for i in range(len(items))}
    base, lock, bdq_calls = fake_model(items), threading.Lock(), [0]

    def answer(req):
        p = req.prompt
        if "four-option quiz" in p and not set(re.findall(r"^[A-D]\) (.*)$", p, re.M)) & originals:  # the BDQ
            with lock:
                bdq_calls[0] += 1
                k = bdq_calls[0]
            if k <= 16:
                return Reply("", refusal="I'm sorry, but I can't assist with that request.")
            return "B" if k <= 16 + 13 else "A"
        return base(req)

    with FakeServer(answers=answer) as srv:
        c = run_contamination(str(tmp_path / "runs" / "*"), out_dir=tmp_path / "out", make_demo=False,
                              perturber=Role("fake", srv.base_url), quiz_taker=Role("fake", srv.base_url),
                              n_repeats=1)
    (r,) = c.results
    assert r.bdq_counts == {"A": 34, "B": 13, "C": 0, "D": 0, "invalid": 0, "withheld": 16, "cut_off": 0}
    assert r.non_preferred == ["C"] and r.truly_non_preferred  # 13 ≥ 47/4: B is not non-preferred


def test_a_language_other_than_en_or_ru_is_refused_before_anything_is_sent(tmp_path):
    """``cresowlve report 05_contamination -p lang de`` (``contamination run --lang`` takes only ru/en):
    before, no run matched the language, so every configuration was "not tested", exit 0."""
    import pytest

    from cresowlve_core.failures import InputError

    items = make_items()
    write_runs(tmp_path, items)
    with FakeServer(answers=fake_model(items)) as srv:
        role = Role("fake", srv.base_url)
        with pytest.raises(InputError, match=r"^lang: 'de' is not a language of the benchmark \(en, ru\)$"):
            run_contamination(str(tmp_path / "runs" / "*"), out_dir=tmp_path / "out", lang="de", perturber=role,
                              quiz_taker=role, make_demo=False)
        assert srv.total == 0
