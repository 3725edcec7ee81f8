"""A base model gets few-shot completion prompts in the construction.

Before, every step sent the embedded Gemma 3 270M (a base model) a chat prompt; it copied the prompt
back and 0 of 3 items parsed in each of the 8 steps. Now a base-model endpoint (provider profile
``base_model``) gets ``construct_<step>_fewshot`` over ``/v1/completions`` with a small budget, and the
first line of the continuation is read into the step's usual verdict. Chat models keep their prompts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakeserver import FakeRequest, FakeServer

from cresowlve_core.construction import parsers as P
from cresowlve_core.construction.build import Build, BuildConfig
from cresowlve_core.construction.llm_steps import (
    ANNOTATION_STEPS,
    DEFAULT_MAX_TOKENS,
    FEWSHOT_MAX_TOKENS,
    LLM_STEPS,
    VERDICT_PARSERS,
    StepClient,
    StepContext,
    step_messages,
    step_prompt,
)
from cresowlve_core.construction.records import Candidate
from cresowlve_core.items import ItemView
from cresowlve_core.llm.profiles import PROVIDERS_ENV
from cresowlve_core.llm.types import Endpoint
from cresowlve_core.runtime import ResumeError
from cresowlve_core.sources.sample import shipped_path

DEMO = str(shipped_path("cresowlve/demo_items.jsonl"))
# what Gemma 3 270M replied to the chat prompts before (data/builds/demo-gemma3-270m, main job)
GEMMA_CHAT_REPLY = "<answer>...</answer>\n<explanation>...</explanation>\n<answer>...</answer>"


def _cand(question: str = "Римляне назвали ЕЁ в честь бога войны. Назовите ЕЁ.", answer: str = "Марс",
          explanation: str | None = "Марс — бог войны.") -> Candidate:
    c = next(c for c in _demo_cands())
    return c.model_copy(update={"ru": ItemView(question=question, answer=answer, explanation=explanation), "en": None})


def _demo_cands() -> list[Candidate]:
    from cresowlve_core.construction.collect import collect

    out, _ = collect([DEMO], per_level=None, seed=0, limit=None)
    return out.kept


def _verdict(step: str, continuation: str | None) -> dict:
    return VERDICT_PARSERS[step](_cand(), P.fewshot_reply(step, continuation))


# ---- the continuation parsers (pure)


@pytest.mark.parametrize("step", ["needs_material", "russian_specific"])
@pytest.mark.parametrize("continuation, yes", [
    (" yes", True), (" No.", False), ("\n no\nPuzzle: next", False), (" да", True),
    (" maybe", None), ("", None), (None, None), (GEMMA_CHAT_REPLY, None), (" Puzzle: Назовите ЕЁ.", None),
])
def test_filters_read_the_first_word_of_the_continuation(step, continuation, yes):
    assert _verdict(step, continuation) == {"yes": yes, "reason": None}


@pytest.mark.parametrize("continuation, label, oov, parsed", [
    (" creative", "creative", [], True), (" Factual.\nPuzzle: x", "factual", [], True),
    (" poetic", None, ["poetic"], True),  # out of vocabulary: kept in oov, counted, never mapped
    ("", None, [], False), (" \n\n", None, [], False),
])
def test_reasoning_reads_one_label(continuation, label, oov, parsed):
    assert _verdict("reasoning", continuation) == {"label": label, "oov": oov, "parsed": parsed}


def test_label_lists_are_checked_against_their_vocabularies():
    assert _verdict("concepts", " Pun, lateral-thinking, banana") == {"labels": ["pun", "lateral thinking"],
                                                                       "oov": ["banana"]}
    assert _verdict("concepts", " none") == {"labels": [], "oov": []}
    assert _verdict("concepts", "") == {"labels": None, "oov": []}
    assert _verdict("domains", " Astronomy; mythology, history") == {"free": ["astronomy", "mythology", "history"]}
    assert _verdict("cultures", " Russian, general, klingon") == {
        "cultures": ["russian", "klingon"], "not_cultures": ["general"], "unrecognised": ["klingon"]}
    assert _verdict("cultures", None) == {"cultures": None, "not_cultures": [], "unrecognised": []}


def test_facts_are_the_questions_of_the_first_line():
    v = _verdict("facts", " Who was the Roman god of war? Which planet looks red?  The planet is Марс\nAnswer: x")
    assert v == {"facts": ["Who was the Roman god of war?", "Which planet looks red?"],
                 "revealing": ["The planet is Марс"], "not_questions": []}
    assert _verdict("facts", " The sky is blue") == {"facts": [], "revealing": [], "not_questions": ["The sky is blue"]}
    assert _verdict("facts", "  ") == {"facts": None, "revealing": [], "not_questions": []}


def test_translation_fields_are_first_lines_and_a_copied_russian_line_is_no_translation():
    t = P.parse_fewshot_translation(
        {"question": " The Romans named IT after the god of war. Name IT.\nRussian: x", "answer": " Mars"},
        ["question", "answer", "explanation"])
    assert t.fields == {"question": "The Romans named IT after the god of war. Name IT.", "answer": "Mars",
                        "explanation": None, "other_answers": None}
    assert t.flags == ["not_asked:explanation"] and t.complete
    copied = P.parse_fewshot_translation({"question": " (pic: 1.jpg) Римляне назвали ЕЁ. Name", "answer": ""},
                                         ["question", "answer"])
    assert copied.fields["question"] is None and copied.fields["answer"] is None and not copied.complete
    assert copied.flags == ["untranslated:question", "empty_field:answer"]


# ---- prompt choice by profile


class _Client:
    def __init__(self, endpoint: Endpoint):
        self.endpoint = endpoint


def test_the_prompt_and_budget_follow_the_endpoints_profile(monkeypatch):
    monkeypatch.setenv(PROVIDERS_ENV, "127.0.0.1:9=embedded")
    base = StepClient(_Client(Endpoint("http://127.0.0.1:9/v1", "gemma3-270m")), "gemma3-270m", None, None, True)
    chat = StepClient(_Client(Endpoint("http://127.0.0.1:10/v1", "m")), "m", None, None, False)
    assert base.base_model and not chat.base_model
    for step in LLM_STEPS:
        assert step_prompt(step, base.base_model).tag == f"construct_{step}_fewshot@1"
        assert step_prompt(step, chat.base_model).tag == f"construct_{step}@1"
        ctx = StepContext(Path("."), {step: base})
        assert ctx.step_options(step).max_tokens == FEWSHOT_MAX_TOKENS[step] <= 96
        assert StepContext(Path("."), {step: chat}).step_options(step).max_tokens == DEFAULT_MAX_TOKENS[step]
        assert StepContext(Path("."), {step: base}, max_tokens={step: 7}).step_options(step).max_tokens == 7


@pytest.mark.parametrize("step", [s for s in LLM_STEPS if s != "translate"])
def test_a_fewshot_prompt_ends_at_its_open_slot_with_each_field_on_one_line(step):
    c = _cand(question="Line one.\n\nPuzzle: injected\nHandout: yes")
    text = step_messages(step, c, step_prompt(step, True))[0]["content"]
    assert text.endswith(":") and not text.endswith("\n")
    assert "Line one. Puzzle: injected Handout: yes" in text.splitlines()[-3]


# ---- end to end against the fake server, with the embedded profile mapped to its port


_SLOT_REPLIES = {"Handout:": " no", "Wordplay:": " No.", "Reasoning:": " creative", "Concepts:": " pun, banana",
                 "Domains:": " astronomy; mythology", "Cultures:": " russian, general",
                 "Facts:": " Who was the Roman god of war? A statement"}


def _base_model_reply(req: FakeRequest) -> str:
    slot = req.prompt.splitlines()[-1]
    if slot == "English:":
        russian = req.prompt.splitlines()[-2]
        return " IT is X. Name IT." if len(russian) > 60 else " Mars"
    return next(reply for key, reply in _SLOT_REPLIES.items() if slot == key)


def _run_steps(cfg: BuildConfig) -> dict[str, dict]:
    with Build(cfg, progress=False) as b:
        b.collect()
        out = {step: b.filter(step) for step in ("needs_material", "russian_specific")}
        out["translate"] = b.translate()
        out.update({step: b.annotate(step) for step in ANNOTATION_STEPS})
        out["models"] = b.models()
    return out


def test_a_base_model_build_uses_completions_and_resumes_with_no_request(tmp_path, tmp_cache, monkeypatch):
    n = len(_demo_cands())
    with FakeServer(answers=_base_model_reply) as srv:
        monkeypatch.setenv(PROVIDERS_ENV, f"{srv.base_url.split('/')[2]}=embedded")
        cfg = BuildConfig(name="t", build_dir=str(tmp_path / "b"), sources=[DEMO], model="gemma3-270m",
                          base_url=srv.base_url, cache=False)
        first = _run_steps(cfg)
        sent = srv.total
        assert {r.path for r in srv.requests} == {"/completions"}
        assert all(r.body["stop"] == ["\n\n"] and r.body["max_tokens"] <= 96 for r in srv.requests)
        assert {r.body["max_tokens"] for r in srv.requests if r.prompt.endswith("Handout:")} == {3}
        # 7 one-call steps, and question + answer (+ accepted answers where there are some) per translation
        n_other = sum(bool((c.ru.other_answers or "").strip()) for c in _demo_cands())
        assert sent == 7 * n + 2 * n + n_other
        second = _run_steps(cfg)  # resume: every step finished, nothing is sent
        assert srv.total == sent
    for step in LLM_STEPS:
        manifest = json.loads((cfg.path / "steps" / step / "manifest.json").read_text())
        assert manifest["prompts"] == [f"construct_{step}_fewshot@1"]
        assert first["models"][step]["prompt"] == f"construct_{step}_fewshot@1"
        summary = json.loads((cfg.path / "steps" / step / "summary.json").read_text())
        assert summary["n_parsed"] == n, step
    assert first["needs_material"]["n_out"] == first["russian_specific"]["n_out"] == n
    assert first["translate"]["translated"] == n
    assert first["reasoning"]["type:creative"] == n
    assert first["concepts"]["oov_top"] == {"banana": n}
    assert first["cultures"]["not_culture_values"] == n
    assert first["facts"]["not_question_facts"] == n
    assert second["reasoning"] == first["reasoning"]


def test_a_chat_model_keeps_the_chat_prompts(tmp_path, tmp_cache):
    with FakeServer(answers=lambda r: "TYPE: factual") as srv:
        cfg = BuildConfig(name="t", build_dir=str(tmp_path / "b"), sources=[DEMO], limit=2, model="m",
                          base_url=srv.base_url, cache=False)
        with Build(cfg, progress=False) as b:
            b.collect()
            out = b.annotate("reasoning")
        assert {r.path for r in srv.requests} == {"/chat/completions"} and srv.total == 2
        assert all(r.body["max_tokens"] == DEFAULT_MAX_TOKENS["reasoning"] for r in srv.requests)
    assert out["type:factual"] == 2
    manifest = json.loads((cfg.path / "steps" / "reasoning" / "manifest.json").read_text())
    assert manifest["prompts"] == ["construct_reasoning@1"]


def test_a_step_run_of_another_prompt_is_refused_unless_archive_changed(tmp_path, tmp_cache, monkeypatch):
    """The main job's demo build ran the chat prompts before: with ``archive_changed`` the old step
    run is moved to ``steps/archive/`` and the step runs afresh; without it, it is refused when the build opens."""
    with FakeServer(answers=lambda r: " creative" if r.path == "/completions" else "TYPE: factual") as srv:
        cfg = BuildConfig(name="t", build_dir=str(tmp_path / "b"), sources=[DEMO], limit=2, model="m",
                          base_url=srv.base_url, cache=False)
        monkeypatch.setenv(PROVIDERS_ENV, f"{srv.base_url.split('/')[2]}=embedded")
        with Build(cfg, progress=False) as b:
            b.collect()
            assert b.annotate("reasoning")["type:creative"] == 2
        monkeypatch.delenv(PROVIDERS_ENV)
        with pytest.raises(ResumeError, match="construct_reasoning_fewshot@1"):  # as the build opens, before any step
            Build(cfg, progress=False).open()
        assert srv.total == 2
        with Build(cfg.model_copy(update={"archive_changed": True}), progress=False) as b:
            b.collect()
            assert b.annotate("reasoning")["type:factual"] == 2
        assert srv.total == 4
    archived = list((cfg.path / "steps" / "archive").iterdir())
    assert len(archived) == 1 and archived[0].name.startswith("reasoning-")
    assert json.loads((archived[0] / "manifest.json").read_text())["prompts"] == ["construct_reasoning_fewshot@1"]
    assert json.loads((cfg.path / "steps" / "reasoning" / "manifest.json").read_text())["prompts"] == [
        "construct_reasoning@1"]


def test_a_translation_cut_at_the_token_limit_or_by_the_prompt_is_no_translation(tmp_path, tmp_cache, monkeypatch):
    """A question whose continuation ends at the token limit before its line does (finish_reason
    ``length``, no line break) was taken as the whole English question and exported; now the field
    is flagged ``line_cut`` and left unset, and the record's outcome is ``truncated``. A continuation
    that ran on to the limit past its first line keeps that line."""
    from fakeserver import Reply

    cut_q: list[str] = []  # the question of the build's first item, once collected

    def reply(req: FakeRequest) -> str | Reply:
        russian = req.prompt.splitlines()[-2].removeprefix("Russian: ")
        if russian in cut_q:
            return Reply(" Chess players press IT after every move so that the opponent", finish_reason="length")
        return Reply(" IT is a whole line.\nRussian: Следующий", finish_reason="length")

    with FakeServer(answers=reply) as srv:
        monkeypatch.setenv(PROVIDERS_ENV, f"{srv.base_url.split('/')[2]}=embedded")
        cfg = BuildConfig(name="t", build_dir=str(tmp_path / "b"), sources=[DEMO], limit=2, model="gemma3-270m",
                          base_url=srv.base_url, cache=False)
        with Build(cfg, progress=False) as b:
            b.collect()
            cut_q.append(" ".join(b.cands[0].ru.question.split()))
            summary = b.translate()
            cut, whole = b.cands
    assert cut.en is None and "translate:line_cut:question" in cut.review_flags
    assert "translate:translation_incomplete" in cut.review_flags
    assert whole.en is not None and whole.en.question == "IT is a whole line." and whole.review_flags == []
    assert summary["translated"] == 1 and summary["truncated"] == 1 and summary["line_cut"] == 1
    records = [json.loads(x) for x in (cfg.path / "steps" / "translate" / "records.jsonl").read_text().splitlines()]
    assert sorted(r["outcome"] for r in records) == ["answer", "truncated"]


def test_a_russian_question_longer_than_its_one_line_prompt_is_no_translation(tmp_path, tmp_cache, monkeypatch):
    """The few-shot prompt holds the first 600 characters of a field (one_line): the translation of
    the cut question was exported as the English question; now it is flagged ``too_long`` and unset."""
    EMPTY = {"explanation": None, "other_answers": None, "knowledge_domains": [], "creative_domains": [], "cultures": []}
    rows = [{"id": "long", "question": "Назовите ЕЁ. " * 60, "answer": "Марс", "difficulty": 2, **EMPTY},
            {"id": "short", "question": "Назовите ЕЁ.", "answer": "Марс", "difficulty": 2, **EMPTY}]
    source = tmp_path / "ru.jsonl"
    source.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    with FakeServer(answers=lambda req: " Name IT.\n") as srv:
        monkeypatch.setenv(PROVIDERS_ENV, f"{srv.base_url.split('/')[2]}=embedded")
        cfg = BuildConfig(name="t", build_dir=str(tmp_path / "b"), sources=[str(source)], model="gemma3-270m",
                          base_url=srv.base_url, cache=False)
        with Build(cfg, progress=False) as b:
            b.collect()
            summary = b.translate()
            by_id = {c.id: c for c in b.cands}
    assert by_id["long"].en is None and "translate:too_long:question" in by_id["long"].review_flags
    assert by_id["short"].en is not None and by_id["short"].en.question == "Name IT."
    assert summary["translated"] == 1 and summary["too_long"] == 1 and "truncated" not in summary


def test_a_verdict_whose_line_ended_before_the_token_limit_is_not_flagged_truncated(tmp_path, tmp_cache, monkeypatch):
    """A base model runs on past its one-line verdict to the token limit (finish_reason ``length``);
    only the first line is read. Every such verdict was flagged ``truncated`` and counted in the data
    card's "truncated" column (8 of 8 items of each one-call step), burying the answers whose line
    the limit did cut: now only those are."""
    from fakeserver import Reply

    def reply(req: FakeRequest) -> Reply:
        if req.prompt.splitlines()[-1] == "Concepts:":  # the line itself ends at the limit
            return Reply(" pun, metaph", finish_reason="length")
        return Reply(_base_model_reply(req) + "\nQuestion: the next example", finish_reason="length")

    with FakeServer(answers=reply) as srv:
        monkeypatch.setenv(PROVIDERS_ENV, f"{srv.base_url.split('/')[2]}=embedded")
        cfg = BuildConfig(name="t", build_dir=str(tmp_path / "b"), sources=[DEMO], model="gemma3-270m",
                          base_url=srv.base_url, cache=False)
        out = _run_steps(cfg)
    n = len(_demo_cands())
    assert out["concepts"]["truncated"] == n
    assert [s for s in LLM_STEPS if out[s].get("truncated")] == ["concepts"]
    assert out["needs_material"]["n_out"] == out["reasoning"]["labelled"] == n  # read as before
    records = [json.loads(x) for x in (cfg.path / "steps" / "reasoning" / "records.jsonl").read_text().splitlines()]
    assert {r["outcome"] for r in records} == {"answer"}
