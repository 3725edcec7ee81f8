"""Refused and filtered answers are final and not correct; failed ones are errors asked again.

The model under test and the judge are one ChatModel double (tests/outcome_double.py): item 1 is
refused, item 2 is filtered with partial text that equals its reference, item 3 fails, item 4 is
answered but its judge refuses to give a verdict.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from outcome_double import REFUSAL, OutcomeModel, failed, filtered, patch_clients, refused

import cresowlve_core.evaluation.runner as runner
from cresowlve_core.evaluation.runner import EvalConfig, evaluate_async, rescore, summary_line
from cresowlve_core.items import Item, ItemView


def items() -> list[Item]:
    return [Item(id=f"chgk_{i:010x}", en=ItemView(question=f"Puzzle number {i}: who is X?", answer=f"Answer{i}"))
            for i in range(5)]


def reply(fail: bool = True):
    def answer(prompt: str):
        if "candidate_answer" in prompt:  # the judge
            if "<candidate_answer>\nAnswer4" in prompt or "Answer4\n</candidate_answer>" in prompt:
                return refused()
            nonce = re.search(r"VERDICT-([0-9A-F]{8})", prompt).group(1)
            return f"VERDICT-{nonce}: CORRECT"
        n = int(prompt.split("Puzzle number ")[1].split(":")[0])
        if n == 1:
            return refused()
        if n == 2:
            return filtered("<Answer>Answer2</Answer>")  # the reference, cut by the filter: never correct
        if n == 3 and fail:
            return failed()
        return f"<Answer>Answer{n}</Answer>"
    return answer


def config(tmp_path: Path, judge: bool = True) -> EvalConfig:
    return EvalConfig(model="double-model", base_url="http://double.invalid/v1", run_dir=str(tmp_path / "run"),
                      items="test", lang="en", judge_model="double-judge" if judge else None, cache=False)


def latest(run_dir: Path) -> dict[str, dict]:
    lines = (run_dir / "responses.jsonl").read_text(encoding="utf-8").splitlines()
    return {r["id"][-1]: r for r in map(json.loads, lines)}


def test_refused_and_filtered_are_final_and_not_correct(tmp_path, monkeypatch):
    model = OutcomeModel(reply())
    patch_clients(monkeypatch, model, runner)
    out = asyncio.run(evaluate_async(config(tmp_path), items(), progress=False))
    solves = [c for c in model.calls if "candidate_answer" not in c]
    judged = [c for c in model.calls if "candidate_answer" in c]
    assert len(solves) == 5 and len(judged) == 2  # items 0 and 4: the refused, filtered and failed are not judged

    recs = latest(tmp_path / "run")
    r1, r2, r3, r4 = recs["1"], recs["2"], recs["3"], recs["4"]
    assert (r1["status"], r1["outcome"], r1["refusal"]) == ("ok", "refused", REFUSAL)
    assert (r2["status"], r2["outcome"], r2["raw_output"]) == ("ok", "filtered", "<Answer>Answer2</Answer>")
    for r in (r1, r2):
        assert r["scores"] == {"em_strict": False, "em_lenient": False, "judge": False}
        assert r["em_strict"] is False and r["em_lenient"] is False and r["prediction"] is None
        assert (r["judge_status"], r["judge_verdict"]) == ("not_an_answer", "INCORRECT")
    assert (r3["status"], r3["outcome"]) == ("error", "failed") and "server_error" in r3["error"]
    # the judge's refusal leaves that verdict unscored; the answer's EM stands
    assert (r4["judge_status"], r4["judge_outcome"], r4["judge_raw"]) == ("unscored", "refused", REFUSAL)
    assert r4["scores"] == {"em_strict": True, "em_lenient": True, "judge": None}

    s = out.summary
    assert (s["n_ok"], s["n_refused"], s["n_filtered"], s["n_error"]) == (4, 1, 1, 1)
    assert (s["metrics"]["em_strict"]["k"], s["metrics"]["em_strict"]["n"]) == (2, 4)  # 0 and 4 of 0, 1, 2, 4
    assert (s["metrics"]["judge"]["k"], s["metrics"]["judge"]["n"]) == (1, 3)  # 0 correct; 1, 2 not; 4 unscored
    assert s["n_judge_withheld"] == 1
    line = summary_line(s)
    assert "ok=4 (1 refused, 1 filtered) error=1" in line and "1 refused or filtered by the judge" in line
    on_disk = json.loads((tmp_path / "run" / "summary.json").read_text(encoding="utf-8"))
    assert (on_disk["n_refused"], on_disk["n_filtered"]) == (1, 1)

    again = OutcomeModel(reply(fail=False))  # resume: only the failed item is asked again (and judged)
    patch_clients(monkeypatch, again, runner)
    out2 = asyncio.run(evaluate_async(config(tmp_path), items(), progress=False))
    assert len(again.calls) == 2 and all("number 3" in c or "Answer3" in c for c in again.calls)
    assert (out2.summary["n_ok"], out2.summary["n_refused"], out2.summary["n_filtered"]) == (5, 1, 1)

    fresh = rescore(tmp_path / "run")  # rescoring from raw output keeps them not correct
    recs = latest(tmp_path / "run")
    assert recs["2"]["scores"] == {"em_strict": False, "em_lenient": False, "judge": False}
    assert recs["1"]["prediction"] is None and fresh["n_filtered"] == 1
    assert (fresh["metrics"]["em_strict"]["k"], fresh["metrics"]["em_strict"]["n"]) == (3, 5)


def test_without_a_judge_a_refusal_is_false_on_every_formula_metric(tmp_path, monkeypatch):
    model = OutcomeModel(reply())
    patch_clients(monkeypatch, model, runner)
    out = asyncio.run(evaluate_async(config(tmp_path, judge=False), items()[:3], progress=False))
    recs = latest(tmp_path / "run")
    assert len(model.calls) == 3
    assert recs["2"]["scores"] == {"em_strict": False, "em_lenient": False, "judge": None}
    assert recs["2"]["judge_status"] == "not_run"  # no judge in this run: nothing is claimed for it
    assert out.summary["em_lenient"] == 1 / 3 and out.summary["judge_accuracy"] is None


def test_cresowlve_eval_over_http_a_refusal_costs_one_request_and_a_filter_is_never_correct(tmp_path, capsys):
    """Through the real client and wire format: the fake server sends OpenAI's documented refusal
    body (``content: null``, ``refusal``) and a ``finish_reason: content_filter`` whose partial
    text is the reference. Each costs exactly one request, neither is judged, a rerun sends none."""
    from fakeserver import FakeServer, Reply
    from stage_runs import write_items

    from cresowlve_core.cli import main

    def answer(req):
        if "candidate_answer" in req.prompt:
            nonce = re.search(r"VERDICT-([0-9A-F]{8})", req.prompt).group(1)
            return f"VERDICT-{nonce}: CORRECT"
        n = int(req.prompt.split("Puzzle number ")[1].split(":")[0])
        if n == 1:
            return Reply(text="", refusal=REFUSAL)
        if n == 2:
            return Reply(text="<Answer>Answer2</Answer>", finish_reason="content_filter")
        return f"<Answer>Answer{n}</Answer>"

    path = write_items(tmp_path / "items.jsonl", items()[:3])
    args = ["eval", "--model", "m", "--base-url", "", "--items", str(path), "--lang", "en",
            "--run-dir", str(tmp_path / "run"), "--judge-model", "j"]
    with FakeServer(answers=answer) as srv:
        args[4] = srv.base_url
        assert main(args) == 0
        solves = [r for r in srv.requests if "candidate_answer" not in r.prompt]
        assert len(solves) == 3 and srv.total == 4  # one request per answer; only item 0 is judged
        line = capsys.readouterr().out
        assert "ok=3 (1 refused, 1 filtered) error=0" in line
        recs = latest(tmp_path / "run")
        assert (recs["1"]["outcome"], recs["1"]["refusal"]) == ("refused", REFUSAL)
        assert recs["2"]["outcome"] == "filtered" and recs["2"]["scores"]["em_strict"] is False
        assert recs["2"]["judge_verdict"] == "INCORRECT" and recs["0"]["scores"]["judge"] is True
        srv.reset()
        assert main(args) == 0 and srv.total == 0  # resume: nothing re-sent


def test_the_summary_line_names_billed_answers_with_no_text_and_their_cost():
    """Answers the provider billed with no text are asked again; what they cost is spent, not in the answers' cost."""
    meter = {"spent": 0.5, "n_calls": 1, "n_unusable": 6, "unusable_cost": 0.36}
    line = summary_line(runner.summarize([], n_items=1, model_meter=meter))
    assert "| 6 billed answer(s) with no text, asked again ($0.36" in line and "not in cost)" in line
    assert "billed answer" not in summary_line(runner.summarize([], n_items=1, model_meter={**meter, "n_unusable": 0}))


def test_the_summary_line_names_the_judges_billed_answers_with_no_text_too():
    """A judge whose replies came back billed with no text (6 attempts over 3 verdicts, $0.0013): before, the line
    said only "cost $0.0013 (judge $0.0019)", the judge's spending on them in summary.json alone."""
    judge = {"spent": 0.003206, "n_calls": 3, "n_unusable": 6, "unusable_cost": 0.00128, "n_unusable_unknown_cost": 0}
    line = summary_line(runner.summarize([], n_items=1, model_meter={"spent": 0.0013, "n_calls": 3}, judge_meter=judge))
    assert "| judge: 6 billed answer(s) with no text, asked again ($0.0013, not in judge cost)" in line, line
    assert line.count("billed answer") == 1


def test_billed_answers_with_no_text_of_an_earlier_pass_stay_counted(tmp_path, capsys):
    """Each item's first reply is billed with no text (OpenAI's chat shape with an empty ``content``, as
    tests/fakeserver.py builds it: DOC-SHAPED) and asked again. Two passes: 2 items, then a third. Before: the
    second pass's summary named only its own ("1 billed answer(s) with no text, asked again ($0.0000564, ...)")
    while the run's cost counted all three answers, the first pass's $0.0001 in no total, in the runs table too."""
    from fakeserver import FakeServer

    from cresowlve_core.cli import main
    from cresowlve_core.evaluation.listing import run_row

    def answer(req):
        return "" if req.prompt_count == 1 else "<Answer>x</Answer>"

    with FakeServer(answers=answer) as srv:
        args = ["eval", "--model", "gpt-4.1-mini", "--base-url", srv.base_url, "--items", "demo", "--lang", "en",
                "--run-dir", str(tmp_path / "run"), "--no-cache", "--concurrency", "1"]
        assert main([*args, "--limit", "2"]) == 0
        first = json.loads((tmp_path / "run" / "summary.json").read_text())["spent_now"]["model"]
        assert main([*args, "--limit", "3"]) == 0
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert (first["n_unusable"], s["spent_now"]["model"]["n_unusable"]) == (2, 1)
    total = first["unusable_cost"] + s["spent_now"]["model"]["unusable_cost"]
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert f"| 3 billed answer(s) with no text, asked again (${total:.4f}, not in cost)" in line, line
    run = s["unusable_spent"]["model"]
    assert (run["n_unusable"], run["unusable_cost"], run["n_unusable_unknown_cost"]) == (3, pytest.approx(total), 0)
    assert run_row(tmp_path / "run").spent_elsewhere.startswith("+ $0.0002 spent on 3 answer(s) billed with no text")
    code = main(["rescore", "--run-dir", str(tmp_path / "run")])  # a rescore keeps the run's count
    assert code == 0 and json.loads((tmp_path / "run" / "summary.json").read_text())["unusable_spent"]["model"] == run


def test_billed_answers_with_no_text_whose_cost_is_unknown_are_never_shown_as_zero():
    """An unpriced model's answers billed with no text: their cost is unknown, not $0. Before: "12 billed
    answer(s) with no text, asked again ($0.0000 known, not in cost)" when none of their costs was known."""
    from cresowlve_core.llm.pricing import CostMeter

    meter = CostMeter()
    for cost in (None, None, 0.25):
        meter.charge_unusable(cost)
    assert (meter.n_unusable, meter.n_unusable_unknown_cost, meter.unusable_cost) == (3, 2, 0.25)
    line = summary_line(runner.summarize([], n_items=1, model_meter=meter.summary()))
    assert "| 3 billed answer(s) with no text, asked again ($0.2500 for 1, 2 unknown, not in cost)" in line, line
    unpriced = CostMeter()
    unpriced.charge_unusable(None)
    line = summary_line(runner.summarize([], n_items=1, model_meter=unpriced.summary()))
    assert "| 1 billed answer(s) with no text, asked again (cost unknown, not in cost)" in line, line


def test_a_resumed_run_refuses_a_record_of_an_outcome_it_does_not_write(tmp_path):
    """A refused answer's record edited to outcome "blocked": the resume says which record and stops
    (exit 2 from the CLI, nothing sent, the manifest as it was). Before: the record was counted an answer (ok=5, no refusal), the
    CLI exited 0, while 03_analysis counts the same record as no answer."""
    import subprocess
    import sys

    import pytest
    from fakeserver import FakeServer

    from cresowlve_core.runtime import RunDirError

    def fake(req) -> str:
        return "<Answer>Answer0</Answer>"

    run_dir, items_file = tmp_path / "run", tmp_path / "items.jsonl"
    items_file.write_text("".join(it.model_dump_json() + "\n" for it in items()))
    with FakeServer(answers=fake) as srv:
        cfg = EvalConfig(model="m", base_url=srv.base_url, run_dir=str(run_dir), items=str(items_file),
                         cache=False, max_tokens=32)
        asyncio.run(evaluate_async(cfg, items(), progress=False))
        records = run_dir / "responses.jsonl"
        lines = records.read_text().splitlines()
        odd = {**json.loads(lines[1]), "outcome": "blocked"}
        records.write_text("\n".join([lines[0], json.dumps(odd), *lines[2:]]) + "\n")
        sent, manifest = srv.total, (run_dir / "manifest.json").read_text()
        with pytest.raises(RunDirError, match=f"the record of item '{odd['id']}' \\(en\\) has outcome "
                                                       "'blocked', which this version does not write"):
            asyncio.run(evaluate_async(cfg, items(), progress=False))
        proc = subprocess.run([sys.executable, "-m", "cresowlve_core.cli", "eval", "--model", "m", "--base-url",
                               srv.base_url, "--items", str(items_file), "--max-tokens", "32", "--no-cache",
                               "--run-dir", str(run_dir)], capture_output=True, text=True, timeout=120)
        assert srv.total == sent
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].endswith("mend or remove it (nothing was sent)")
    assert (run_dir / "manifest.json").read_text() == manifest  # no resume recorded: it did not happen


def test_a_record_whose_cost_or_token_count_is_not_one_is_refused_not_added_up(tmp_path):
    """A record priced by a negative price (an earlier version took one from $CRESOWLVE_PRICES) or with a count
    below 0. Before: the resume and rescore added them up, 'tokens in/out/reasoning 179/425/n/a | cost $-4.9992'.
    Now the resume names the record and stops (nothing sent), and rescore refuses it (nothing rescored)."""
    import pytest
    from fakeserver import FakeServer

    from cresowlve_core.failures import InputError
    from cresowlve_core.runtime import RunDirError

    run_dir = tmp_path / "run"
    with FakeServer(answers=lambda req: "<Answer>Answer0</Answer>") as srv:
        cfg = EvalConfig(model="m", base_url=srv.base_url, run_dir=str(run_dir), cache=False, max_tokens=32)
        asyncio.run(evaluate_async(cfg, items(), progress=False))
        records = run_dir / "responses.jsonl"
        lines = records.read_text().splitlines()
        for edit, named in ((lambda r: {**r, "cost": -5.0}, "cost -5.0"),
                            (lambda r: {**r, "usage": {**r["usage"], "input_tokens": -100}}, "usage.input_tokens -100"),
                            # replaced answers' and verdicts' cost and counts, hand-edited (before: a TypeError traceback)
                            (lambda r: {**r, "n_replaced": 1, "replaced_cost": "0.01"}, "replaced_cost '0.01'"),
                            (lambda r: {**r, "n_verdicts_replaced": "1"}, "n_verdicts_replaced '1'")):
            odd = edit(json.loads(lines[1]))
            records.write_text("\n".join([lines[0], json.dumps(odd), *lines[2:]]) + "\n")
            sent = srv.total
            with pytest.raises(RunDirError, match=f"the record of item '{odd['id']}' \\(en\\) has {named}, which this "
                                                  "version does not write"):
                asyncio.run(evaluate_async(cfg, items(), progress=False))
            assert srv.total == sent
        records.write_text("\n".join([lines[0], json.dumps({**json.loads(lines[1]), "cost": -5.0}), *lines[2:]]) + "\n")
        with pytest.raises(InputError, match=r"cannot be read: cost: Input should be greater than or equal to 0 "
                                             r"\(it holds -5.0\); mend or remove it \(nothing was rescored\)"):
            rescore(str(run_dir))


def test_rescore_of_a_run_with_an_errored_item_exits_1_naming_it(tmp_path, monkeypatch, capsys):
    """Rescoring sends nothing, so the run stays as its eval left it: one item errored. Before, rescore printed
    'error=1' and exited 0, as if the run were complete; now it exits 1 with the eval's last line. After the
    eval retries that item, rescore exits 0."""
    from cresowlve_core import cli

    patch_clients(monkeypatch, OutcomeModel(reply()), runner)
    asyncio.run(evaluate_async(config(tmp_path, judge=False), items(), progress=False))
    code = cli.main(["rescore", "--run-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and err[-1].startswith("incomplete: 1 errored, 0 not run of 5 items"), err
    assert "rescore sends nothing" in err[-1]
    patch_clients(monkeypatch, OutcomeModel(reply(fail=False)), runner)
    asyncio.run(evaluate_async(config(tmp_path, judge=False), items(), progress=False))
    assert cli.main(["rescore", "--run-dir", str(tmp_path / "run")]) == 0
