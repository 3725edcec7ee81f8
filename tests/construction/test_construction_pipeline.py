"""The construction pipeline end to end on the paper's labelled items, against scripted replies.

The 8 demo items with a Russian view carry their known pipeline outcome in ``meta``; the fake
server answers each step the way the paper's pipeline decided, and the review decisions are the
paper's human-validation removals. Then: funnel, export round-trip through the published-schema
loader and ``cresowlve eval``, resume after a kill, decisions applied.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from fakeserver import FakeRequest, FakeServer

from cresowlve_core.construction import review as R
from cresowlve_core.construction.build import Build, BuildConfig
from cresowlve_core.construction.collect import collect
from cresowlve_core.construction.llm_steps import StepContext, StepModel, open_step_clients, run_step_records
from cresowlve_core.runtime import ClientOptions
from cresowlve_core.sources.hub import read_published_file
from cresowlve_core.sources.sample import load_items, read_items_jsonl, shipped_path

DEMO = str(shipped_path("cresowlve/demo_items.jsonl"))
ITEMS = {it.id: it for it in read_items_jsonl(DEMO) if it.ru is not None}
HUMAN = {"chgk_506e7ac07e": "russian_specific", "chgk_17cad876d2": "needs_material",
         "chgk_e089848e4f": "several_questions", "chgk_c95beab3bb": "outdated"}


SCRIPTED_DOMAINS = ("literature", "music", "quantum basket weaving")  # the last one is in no mapping


def _item_of(prompt: str) -> str:
    """The item a prompt asks about: the question quoted last (few-shot examples come first)."""
    pos = {}
    for iid, it in ITEMS.items():
        texts = [it.ru.question.strip()[:60]] + ([it.en.question.strip()[:60]] if it.en else [])
        pos[iid] = max(prompt.rfind(t) for t in texts)
    best = max(pos, key=pos.get)
    assert pos[best] >= 0, f"unknown item in prompt: {prompt[:200]}"
    return best


def _step_of(prompt: str) -> str:
    markers = {"such external material": "needs_material", "hinges on the Russian language": "russian_specific",
               "Translate this puzzle": "translate", "Classify the reasoning": "reasoning",
               "creative language and thinking concepts": "concepts", "knowledge domains does": "domains",
               "cultures or languages": "cultures", "atomic facts": "facts"}
    return next(step for marker, step in markers.items() if marker in prompt)


def scripted(req: FakeRequest) -> str:
    """The paper's outcomes as model replies (plus one malformed and one out-of-vocabulary case)."""
    step, iid = _step_of(req.prompt), _item_of(req.prompt)
    outcome = ITEMS[iid].meta["pipeline_outcome"]
    if step == "needs_material":
        return "REASON: the text is self-contained.\nANSWER: NO"  # the paper's LLM filter let 17cad876d2 through
    if step == "russian_specific":
        yes = outcome.startswith("removed: Russian language")
        return f"REASON: scripted.\nANSWER: {'YES' if yes else 'NO'}"
    if step == "translate":
        en = ITEMS[iid].en
        return (f"<question>{en.question}</question>\n<answer>{en.answer}</answer>\n"
                f"<explanation>{en.explanation or ''}</explanation>\n<other_answers>{en.other_answers or ''}</other_answers>")
    if step == "reasoning":
        return "TYPE: factual" if iid == "chgk_8947f691ac" else "TYPE: Creative"
    if step == "concepts":
        return "LABELS: metaphor, lateral thinking, banana"
    if step == "domains":
        return "DOMAINS: " + "; ".join(SCRIPTED_DOMAINS)
    if step == "cultures":
        return "CULTURES: Russian, general"
    return "FACTS:\n1. What do contrails look like?\n2. A fact that is not a question"


def _config(tmp_path: Path, base_url: str, **kw) -> BuildConfig:
    return BuildConfig(name="t", build_dir=str(tmp_path / "build"), sources=[DEMO], model="fake", base_url=base_url,
                       cache=False, concurrency=4, min_similarity=0.99, **kw)


def _review(build_dir: Path) -> None:
    s = R.ReviewSession(build_dir, "alice")
    for card in s.cards:
        s.decide(card["id"], HUMAN.get(card["id"], "keep"))


def test_build_follows_the_papers_outcomes_and_exports(tmp_path: Path, tmp_cache) -> None:
    with FakeServer(answers=scripted) as srv:
        cfg = _config(tmp_path, srv.base_url)
        with Build(cfg, progress=False) as b:
            b.collect()
            nm = b.filter("needs_material")
            rs = b.filter("russian_specific")
            tr = b.translate()
            first = b.review()
        assert nm["n_removed"] == 0 and nm["precheck_hits"] >= 1 and nm["precheck_llm_disagree"] >= 1
        assert rs["n_removed"] == 1 and tr["translated"] == 7
        assert first["by_code"] == {"unreviewed": 7}  # nothing decided yet: kept, counted
        _review(cfg.path)  # the paper's human validation
        # a decision saved in an earlier build, for an item this one no longer has
        with (cfg.path / "review" / "decisions__bob.jsonl").open("a") as f:
            f.write('{"item_id": "chgk_gone", "reviewer": "bob", "code": "outdated"}\n')
        res = Build(cfg, progress=False).open().run_all()  # a later build applies the decisions
    funnel = {r["step"]: r["this build"] for r in res["funnel"]}
    assert funnel == {"collected": 8, "−needs external material": 0, "−Russian-specific": 1,
                      "−human validation": 4, "=final": 3, "of which factual": 1, "of which creative": 2}
    card = Path(res["data_card"]).read_text(encoding="utf-8")
    assert "| −Russian-specific | 1 | 799 |" in card and "several_questions" in card
    assert "1 saved decision(s) are for items not in this build" in card and "Reviewers disagreed" not in card
    # round trip through the published-schema loader
    en = read_published_file(res["paths"]["creative/en/parquet"], "en")
    ru = load_items(res["paths"]["creative/ru/jsonl"], "ru")
    assert sorted(i.id for i in en) == sorted(i.id for i in ru) == ["chgk_83a712ed75", "chgk_c97e6fd16d"]
    assert en[0].creative_domains == ["metaphor", "lateral thinking"] and en[0].cultures == ["russian"]
    assert {i.id for i in read_published_file(res["paths"]["factual/en/jsonl"], "en")} == {"chgk_8947f691ac"}
    full = read_items_jsonl(res["paths"]["full"])
    assert {i.id: i.atomic_facts for i in full}["chgk_8947f691ac"] == ["What do contrails look like?"]
    summary = json.loads((cfg.path / "steps_summary.json").read_text())
    assert summary["concepts"]["oov_labels"] == 3 and summary["concepts"]["oov_top"] == {"banana": 3}
    assert summary["cultures"]["not_culture_values"] == 3
    assert summary["consolidate_domains"]["routes_by_value"] == {"mapping": 2, "unmapped": 1}
    assert summary["facts"]["not_question_facts"] == 3


def test_export_runs_through_cresowlve_eval(tmp_path: Path, tmp_cache) -> None:
    from cresowlve_core.cli import main

    with FakeServer(answers=scripted) as srv:
        cfg = _config(tmp_path, srv.base_url)
        with Build(cfg, progress=False) as b:
            res = b.run_all()
    export = res["paths"]["creative/en/parquet"]

    def answer_or_verdict(r: FakeRequest) -> str:  # the judge's verdict line carries the nonce its prompt names
        if "VERDICT-" in r.prompt:
            return f"VERDICT-{r.prompt.rsplit('VERDICT-', 1)[1].split(':')[0]}: CORRECT"
        return "ANSWER: Melody"

    with FakeServer(answers=answer_or_verdict) as srv:
        code = main(["eval", "--items", export, "--lang", "en", "--model", "m", "--base-url", srv.base_url,
                     "--judge-model", "m", "--run-dir", str(tmp_path / "run"), "--no-cache"])
    assert code == 0
    records = [json.loads(x) for x in (tmp_path / "run" / "responses.jsonl").read_text().splitlines()]
    exported = {i.id for i in read_published_file(export, "en")}
    assert len(exported) == 6  # no review decisions in this build: unreviewed items are kept (and counted)
    assert {r["id"] for r in records} == exported and all(r["status"] == "ok" for r in records)
    latest = {r["id"]: r for r in records}  # an answer is written before its verdict
    assert all(r["judge_verdict"] == "CORRECT" for r in latest.values())  # the judge's verdicts were read


_KILL_SCRIPT = """
import asyncio, sys
from pathlib import Path
from cresowlve_core.construction.collect import collect
from cresowlve_core.construction.llm_steps import StepContext, StepModel, open_step_clients, run_step_records
from cresowlve_core.runtime import ClientOptions
cands = collect([sys.argv[1]])[0].kept
opts = ClientOptions(cache=False, concurrency=2)
with open_step_clients({"default": StepModel("fake", sys.argv[2])}, opts) as clients:
    asyncio.run(run_step_records("translate", cands, StepContext(Path(sys.argv[3]), clients, opts, progress=False)))
"""


def test_step_resumes_after_a_kill(tmp_path: Path, tmp_cache) -> None:
    """SIGKILL a step mid-run and tear its last line; the re-run sends only what is missing."""
    import subprocess
    import sys
    import time

    cands = collect([DEMO])[0].kept
    path = tmp_path / "steps" / "translate" / "records.jsonl"
    with FakeServer(answers=scripted, latency_s=0.4) as srv:
        proc = subprocess.Popen([sys.executable, "-c", _KILL_SCRIPT, DEMO, srv.base_url, str(tmp_path)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not path.exists() or len(path.read_text().splitlines()) < 2):
            time.sleep(0.05)
        proc.kill()
        proc.wait()
        done_before = [json.loads(x)["key"] for x in path.read_text().splitlines()]
        assert 2 <= len(done_before) < len(cands)
        with path.open("a") as f:
            f.write('{"key": "chgk_torn", "status": "o')  # a kill mid-write
        sent_before = srv.total
        with open_step_clients({"default": StepModel("fake", srv.base_url)}, ClientOptions(cache=False)) as clients:
            ctx = StepContext(tmp_path, clients, ClientOptions(cache=False, concurrency=2), progress=False)
            records, stopped = asyncio.run(run_step_records("translate", cands, ctx))
    assert stopped is None and len(records) == len(cands)
    assert all(r["status"] == "ok" for r in records.values())
    assert srv.total - sent_before == len(cands) - len(done_before)
    assert (tmp_path / "steps" / "translate" / "records.jsonl.torn").exists()
    keys = [json.loads(x)["key"] for x in path.read_text().splitlines()]
    assert sorted(keys) == sorted(c.id for c in cands)  # each item exactly once


def test_changed_prompt_or_model_is_not_resumed(tmp_path: Path, tmp_cache) -> None:
    from cresowlve_core.runtime import ResumeError

    cands = collect([DEMO])[0].kept[:2]
    with FakeServer(answers=scripted) as srv:
        for model, expect in (("fake", None), ("other", ResumeError)):
            with open_step_clients({"default": StepModel(model, srv.base_url)}, ClientOptions(cache=False)) as clients:
                ctx = StepContext(tmp_path, clients, ClientOptions(cache=False), progress=False)
                if expect:
                    with pytest.raises(expect):
                        asyncio.run(run_step_records("reasoning", cands, ctx))
                else:
                    asyncio.run(run_step_records("reasoning", cands, ctx))


def test_malformed_replies_flag_items_and_never_guess(tmp_path: Path, tmp_cache) -> None:
    def bad(req: FakeRequest) -> str:
        step = _step_of(req.prompt)
        if step == "translate":  # answer tag missing, placeholders dropped
            return "<question>Name him.</question>"
        return "I think it might be so."

    with FakeServer(answers=bad) as srv:
        cfg = _config(tmp_path, srv.base_url)
        with Build(cfg, progress=False) as b:
            res = b.run_all()
            flags = {c.id: c.review_flags for c in b.cands}
    summary = json.loads((cfg.path / "steps_summary.json").read_text())
    assert summary["needs_material"]["unparseable"] == 8 and summary["needs_material"]["n_removed"] == 0
    assert summary["translate"]["translation_incomplete"] == 8 and "translated" not in summary["translate"]
    assert summary["reasoning"]["unparseable"] == 8
    assert "translate:missing_tag:answer" in flags["chgk_c97e6fd16d"]
    assert "translate:placeholder_lost:X:ИКС,ИКСОМ" in flags["chgk_c97e6fd16d"]
    assert res["counts"] == {"creative": 0, "factual": 0, "untranslated": 8, "no_reasoning_type": 0}
    assert all(i.en is None for i in read_items_jsonl(res["paths"]["full"]))  # never the Russian text


def test_data_card_reports_the_agreement_once_annotated(tmp_path: Path, tmp_cache) -> None:
    """The agreement sample labelled by two reviewers through the annotation API; the next build
    scores it and the data card carries the numbers (with n) that agreement.json holds."""
    with FakeServer(answers=scripted) as srv:
        cfg = _config(tmp_path, srv.base_url, agreement_n=4)
        with Build(cfg, progress=False) as b:
            first = b.run_all()
        assert "Not yet annotated: a seeded sample of 4" in Path(first["data_card"]).read_text(encoding="utf-8")
        for reviewer, rtype in (("ann", "creative"), ("bob", "factual")):
            s = R.AnnotationSession(cfg.path, reviewer)
            while (card := s.next_card()) is not None:
                s.annotate(card["id"], reasoning_type=rtype, concepts=["metaphor"], domains=["Literature"],
                           cultures=["Russian"])
        sent = srv.total
        with Build(cfg, progress=False) as b:
            res = b.run_all()
        assert srv.total == sent
    result = json.loads((cfg.path / "agreement.json").read_text())
    assert result["n_items"] == 4 and result["reviewers"] == ["ann", "bob"]
    card = Path(res["data_card"]).read_text(encoding="utf-8")
    rt = result["reasoning_type"]
    assert f"| reasoning type | {rt['n']} | raw agreement | {rt['raw_agreement']:.3f} |" in card
    assert f"| reasoning type | {rt['n']} | Fleiss' κ | {rt['fleiss_kappa']:.3f} |" in card
    concepts = result["concepts"]
    assert (f"| creative concepts | 4 | Gwet's AC1, support-weighted over {concepts['n_labels']} label(s) | "
            f"{concepts['overall']:.3f} |") in card
    assert f"| cultures | russian | {result['cultures']['per_label']['russian']['ac1']:.3f} |" in card
    assert "Not yet annotated" not in card


@pytest.mark.parametrize("text, error", [
    ('{"groups": {"Music": ["jazz"],}}', r"mapping\.json:1: not JSON \(Expecting property name"),
    # a string was read letter by letter: "a" and "z" mapped to Music, "jazz" to nothing
    ('{"groups": {"Music": "jazz, blues"}}', r"mapping\.json: group 'Music' must be a list of domain strings"),
    ('{"groups": {"Music": ["jazz", 7]}}', r"mapping\.json: group 'Music' must be a list of domain strings"),
])
def test_a_broken_domain_mapping_is_one_error_before_any_model_call(tmp_path: Path, tmp_cache, text: str,
                                                                     error: str) -> None:
    from cresowlve_core.failures import InputError

    mapping = tmp_path / "mapping.json"
    mapping.write_text(text, encoding="utf-8")
    with FakeServer(answers=scripted) as srv:
        cfg = _config(tmp_path, srv.base_url, mapping_file=str(mapping))
        with pytest.raises(InputError, match=error):
            Build(cfg, progress=False).open().run_all()
        assert srv.total == 0


def test_a_domain_mapping_not_in_utf8_is_one_error_naming_its_line_and_one_with_a_bom_is_read(tmp_path: Path) -> None:
    """A mapping saved in Latin-1 (or UTF-16) was a UnicodeDecodeError traceback; one saved as "UTF-8 with BOM"
    (Notepad, a spreadsheet) was refused as "not JSON (Unexpected UTF-8 BOM ...)"."""
    from cresowlve_core.construction.domains import load_mapping
    from cresowlve_core.failures import InputError

    text = '{"groups": {\n  "Music": ["café-concert"]}}\n'
    latin1, utf16, bom = tmp_path / "latin1.json", tmp_path / "utf16.json", tmp_path / "bom.json"
    latin1.write_bytes(text.encode("latin-1"))
    utf16.write_bytes(text.encode("utf-16"))
    bom.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    with pytest.raises(InputError, match=r"latin1\.json:2: not UTF-8 \(byte 0xe9\); save the file as UTF-8"):
        load_mapping(latin1)
    with pytest.raises(InputError, match=r"utf16\.json:1: not UTF-8 \(byte 0xff\)"):
        load_mapping(utf16)
    assert load_mapping(bom)["café concert"] == "Music"  # keys normalised (normalise_label)


def test_a_translation_run_again_is_not_counted_as_human_validated(tmp_path: Path, tmp_cache) -> None:
    """Keep decisions were made on model A's translations; the build is run again on model B
    (archive_changed): B's translations are not human-validated, and the funnel says so."""
    def other_translation(req: FakeRequest) -> str:
        text = scripted(req)
        return text.replace("<question>", "<question>Retranslated: ") if _step_of(req.prompt) == "translate" else text

    with FakeServer(answers=scripted) as srv:
        cfg = _config(tmp_path, srv.base_url, limit=3)
        with Build(cfg, progress=False) as b:
            b.collect()
            b.filter("needs_material")
            b.filter("russian_specific")
            b.translate()
            b.review()
        s = R.ReviewSession(cfg.path, "alice")
        for card in s.cards:
            s.decide(card["id"], "keep")
    with FakeServer(answers=other_translation) as srv:
        cfg2 = _config(tmp_path, srv.base_url, limit=3, archive_changed=True).model_copy(update={"model": "other"})
        res = Build(cfg2, progress=False).open().run_all()
    funnel = {r["step"]: r["this build"] for r in res["funnel"]}
    assert funnel["of which not human-validated"] == funnel["=final"] == len(s.cards)
    summary = json.loads((cfg.path / "steps_summary.json").read_text())
    assert summary["human_validation"]["by_code"] == {"stale": len(s.cards)}
    card = Path(res["data_card"]).read_text(encoding="utf-8")
    assert f"{len(s.cards)} keep decision(s) were made on another English translation" in card
