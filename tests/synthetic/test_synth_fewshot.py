"""A base-model verbaliser and solver get few-shot completion prompts (the chat prompts gave
"Synthetic: 0 of 4 kept"): the embedded Gemma 3 270M copied the chat prompt back, so 0 of 4 verbalisations
parsed and the solver got nothing. The line parser keeps the chat parser's guards; the prompt is
chosen by the endpoint's provider profile; end to end against the fake server mapped to the
``embedded`` profile exactly as the embedded server maps its own port (llm/local.py)."""

from __future__ import annotations

import json
import re

import pytest
from fakeserver import FakeServer, Reply
from test_synth_pipeline import cfg, graph

from cresowlve_core.llm.profiles import PROVIDERS_ENV
from cresowlve_core.llm.types import Endpoint
from cresowlve_core.prompts import load_prompt
from cresowlve_core.synthetic.answers import answer_names, find_leaks
from cresowlve_core.synthetic.candidates import build_candidates
from cresowlve_core.synthetic.domains import domains_by_name
from cresowlve_core.synthetic.facts import FactRules
from cresowlve_core.synthetic.leap import extract, solver_prompt
from cresowlve_core.synthetic.notability import NotabilityBand
from cresowlve_core.synthetic.pipeline import run_synth, summary_line
from cresowlve_core.synthetic.verbalise import (
    parse_fewshot_verbalisation,
    parse_verbalisation,
    verbalise_messages,
    verbalise_prompt,
)

GOOD = (" X studied at Kings College and won the Booker Prize. Who is X?\n"
        "Obfuscated: HE learnt among monarchs and was crowned by a publisher's bookmaker. Who is HE?\n"
        "Explanation: Kings College (\"among monarchs\"); the Booker Prize (\"a bookmaker\").")
# what Gemma 3 270M gave back for the chat prompt on main before this change (the first 200 characters)
GEMMA_CHAT_ECHO = ("You write puzzles for the intellectual game \"What? Where? When?\". You are given a hidden answer and "
                   "a few true facts about it. Write three things:\n\n1. LITERAL: a question that states the facts")


def fewshot_prompt(answer: str = "Kazuo Ishiguro", facts: str = "educated at: Kings College") -> str:
    text = load_prompt("synth_verbalise_fewshot").render(answer=answer, answer_description="novelist", facts=facts)
    return text.rstrip()


def test_a_fewshot_continuation_parses_into_three_parts():
    v = parse_fewshot_verbalisation(GOOD, prompt=fewshot_prompt())
    assert v is not None
    assert v.literal == "X studied at Kings College and won the Booker Prize. Who is X?"
    assert v.obfuscated.startswith("HE learnt among monarchs") and v.placeholders == ("HE",)
    assert v.explanation.startswith("Kings College")
    # the model may write the slot's label again, or markdown around a label
    again = parse_fewshot_verbalisation("\nLiteral: " + GOOD.strip().replace("Obfuscated:", "**Obfuscated:**"))
    assert again is not None and again.literal == v.literal and again.obfuscated == v.obfuscated


@pytest.mark.parametrize("text", [
    None, "", "   \n",
    GEMMA_CHAT_ECHO,  # the chat prompt copied back: no labelled lines
    GOOD.split("\nExplanation")[0],  # cut by the token budget before the explanation
    GOOD.replace("\nObfuscated:", "\n\nObfuscated:"),  # the blank line ends the continuation
    GOOD.replace("\nExplanation:", "\nAnswer: Salman Rushdie\nExplanation:"),  # a next example begins first
    "\nObfuscated: HE is hidden.\nExplanation: it is him.",  # no literal line
])
def test_incomplete_or_misshapen_continuations_are_unparsed(text):
    assert parse_fewshot_verbalisation(text, prompt=fewshot_prompt()) is None


def test_an_echo_of_a_worked_example_is_never_a_puzzle():
    prompt = fewshot_prompt()
    example = prompt.split("Answer: Titanic")[1].split("\n\n")[0]  # the Titanic example's lines
    copied = example.split("\nLiteral:", 1)[1]  # the model continues "Literal:" with the example's own lines
    assert parse_fewshot_verbalisation(copied) is not None  # well-formed on its own ...
    assert parse_fewshot_verbalisation(copied, prompt=prompt) is None  # ... but copied from the prompt
    # one copied part is enough
    mixed = GOOD.split("\nExplanation")[0] + "\nExplanation:" + example.split("Explanation:")[1]
    assert parse_fewshot_verbalisation(mixed, prompt=prompt) is None


def test_the_obfuscated_line_needs_an_all_caps_placeholder():
    no_caps = GOOD.replace("HE learnt", "he learnt").replace("Who is HE?", "Who is he?")
    assert parse_fewshot_verbalisation(no_caps) is None
    assert parse_verbalisation("<literal>X won.</literal><obfuscated>he won.</obfuscated>"
                               "<explanation>e</explanation>") is None  # the chat parser's same guard


def test_a_leaked_answer_name_is_found_in_a_parsed_fewshot_puzzle():
    g = graph()
    (cand,) = build_candidates(g, domains_by_name(["writers"]), NotabilityBand(0, 99), FactRules(), 1, 0).candidates
    name = g.english_label(cand.anchor)
    v = parse_fewshot_verbalisation(GOOD.replace("crowned by", f"crowned, like {name.title()}, by"))
    assert v is not None
    leaks = find_leaks(v.obfuscated, answer_names(g, cand.answers))
    assert [(x.qid, x.text) for x in leaks] == [(cand.anchor, name)]
    assert find_leaks(parse_fewshot_verbalisation(GOOD).obfuscated, answer_names(g, cand.answers)) == []


def test_the_prompt_is_chosen_by_the_profile():
    g = graph()
    (cand,) = build_candidates(g, domains_by_name(["writers"]), NotabilityBand(0, 99), FactRules(), 1, 0).candidates
    assert verbalise_prompt(False).tag == "synth_verbalise@1" and verbalise_prompt(True).tag == "synth_verbalise_fewshot@1"
    chat, chat_tag = verbalise_messages(cand, g)
    base, base_tag = verbalise_messages(cand, g, base_model=True)
    assert (chat_tag, base_tag) == ("synth_verbalise@1", "synth_verbalise_fewshot@1")
    assert "<literal>" in chat[0]["content"] and "<literal>" not in base[0]["content"]
    tail = base[0]["content"].split("\n\n")[-1].split("\n")
    assert tail[0].startswith("Answer: name a") and tail[1].startswith("Facts: ") and "; " in tail[1]
    assert tail[2] == "Literal:" and len(tail) == 3  # ends at the open slot, no line break
    assert solver_prompt(False).tag == "solve_cot_en@2" and solver_prompt(True).tag == "solve_plain_en@1"
    assert solver_prompt(False, base_model=True).tag == solver_prompt(True, base_model=True).tag == "solve_fewshot_en@1"
    assert extract(" Name A1\nPuzzle: next", fewshot=True) == ("Name A1", "completion")
    assert extract(" ...", fewshot=True) == (None, "echo")


# ---------------------------------------------------------------- end to end on the fake base model

FEWSHOT_SOLVER = {"a1": ("Name A1", "nobody"), "a2": ("ay one", "name a2"), "a3": ("wrong", "nobody")}


def base_answers(req) -> str:
    assert req.path == "/completions", req.path  # never a chat request to a base model
    p = req.prompt
    if p.endswith("\nLiteral:"):
        anchor = re.search(r"\nAnswer: name (a\d) \(novelist\)\nFacts: [^\n]+\nLiteral:$", p).group(1)
        if anchor == "a5":  # the Titanic example copied back
            return p.split("Answer: Titanic")[1].split("\nLiteral:", 1)[1].split("\n\n")[0]
        obf = f"THIS Name {anchor.upper()} is hidden." if anchor == "a4" else f"THIS one ({anchor}-obf) is hidden."
        return f" X ({anchor}-lit) studied there. Who is X?\nObfuscated: {obf}\nExplanation: it is {anchor}"
    assert p.endswith("\nAnswer:"), p[-80:]
    m = re.search(r"\nPuzzle: [^\n]*\((a\d)-(lit|obf)\)[^\n]*\nAnswer:$", p)
    lit, obf = FEWSHOT_SOLVER[m.group(1)]
    return " " + (lit if m.group(2) == "lit" else obf)


@pytest.mark.embeddings
def test_a_base_model_build_uses_completions_and_resumes_without_a_request(tmp_path, monkeypatch):
    with FakeServer(answers=base_answers) as srv:
        monkeypatch.setenv(PROVIDERS_ENV, f"{srv.base_url.split('/')[2]}=embedded")
        ep = Endpoint(srv.base_url, "gemma3-270m")
        c = cfg(tmp_path, verbaliser_max_tokens=256, solver_max_tokens=96)
        res = run_synth(c, source=graph(), endpoints=(ep, ep), progress=False)
        bodies = [r.body for r in srv.requests]
        assert {r.path for r in srv.requests} == {"/completions"} and len(bodies) == 5 + 2 * 3
        assert all("\n\n" in b["stop"] and not b["prompt"].endswith("\n") for b in bodies)
        assert sorted(b["max_tokens"] for b in bodies) == [96] * 6 + [256] * 5
        st = res.summary["stages"]
        assert (st["parsed"], st["leak_free"], st["solver_answered"], st["kept"]) == (4, 3, 3, 1), st
        assert res.summary["outcomes"] == {"kept": 1, "failed_literal": 1, "solved_obfuscated": 1, "unscored": 0}
        assert res.summary["prompts"] == {"verbalise": ["synth_verbalise_fewshot@1"], "solve": ["solve_fewshot_en@1"]}
        by_anchor = {r["anchor"]: r for r in res.verbalised.values()}
        assert by_anchor["A5"]["parsed"] is None  # the echoed example
        assert [x["name"] for x in by_anchor["A4"]["leaks"]] == ["name a4"]
        kept = next(r for r in res.solved.values() if r["outcome"] == "kept")
        assert (kept["literal"]["answer"], kept["literal"]["extraction"]) == ("Name A1", "completion")
        for step, tag in (("verbalise", "synth_verbalise_fewshot@1"), ("solve", "solve_fewshot_en@1")):
            manifest = json.loads((tmp_path / "build" / step / "manifest.json").read_text())
            assert manifest["prompts"] == [tag] and manifest["provider"] == "embedded"

        srv.reset()
        again = run_synth(c, source=graph(), endpoints=(ep, ep), progress=False)
        assert srv.total == 0  # resume: every unit is already done
        assert again.summary["stages"] == st and again.summary["prompts"] == res.summary["prompts"]


def cut_in_explanation(req):
    """A base-model verbaliser cut off at the token limit inside its explanation line (or after it)."""
    p = req.prompt
    if p.endswith("\nLiteral:"):
        anchor = re.search(r"\nAnswer: name (a\d) \(novelist\)", p).group(1)
        text = f" X ({anchor}-lit) studied there. Who is X?\nObfuscated: THIS one ({anchor}-obf) is hidden.\nExplanation: the school is"
        if anchor == "a1":  # the explanation line was finished: the cut came later
            text += " S12.\nAnswer: name a9"
        return Reply(text, finish_reason="length")
    m = re.search(r"\nPuzzle: [^\n]*\((a\d)-(lit|obf)\)[^\n]*\nAnswer:$", p)
    lit, obf = FEWSHOT_SOLVER.get(m.group(1), ("wrong", "nobody"))
    return " " + (lit if m.group(2) == "lit" else obf)


@pytest.mark.embeddings
def test_a_verbalisation_cut_off_inside_its_explanation_is_no_puzzle(tmp_path, monkeypatch):
    """Cut off at the token limit, each continuation parsed into a puzzle with the explanation
    "the school is" and was exported as kept (5 of 5 kept); only one whose explanation line was
    followed by more text is whole."""
    with FakeServer(answers=cut_in_explanation) as srv:
        monkeypatch.setenv(PROVIDERS_ENV, f"{srv.base_url.split('/')[2]}=embedded")
        ep = Endpoint(srv.base_url, "gemma3-270m")
        res = run_synth(cfg(tmp_path), source=graph(), endpoints=(ep, ep), progress=False)
    by_anchor = {r["anchor"]: r for r in res.verbalised.values()}
    assert all(r["outcome"] == "truncated" for r in by_anchor.values())
    assert by_anchor["A1"]["parsed"]["explanation"] == "the school is S12."
    assert [a for a, r in sorted(by_anchor.items()) if r["parsed"] is None] == ["A2", "A3", "A4", "A5"]
    assert res.summary["stages"]["parsed"] == 1 and res.summary["cut_off"]["verbalise"] == 4
    assert "5 verbalised (4 cut off at the token limit: no puzzle) (1 parsed" in summary_line(res.summary, tmp_path)
    rows = [json.loads(x) for x in (tmp_path / "build" / "synthetic_items.jsonl").read_text().splitlines()]
    assert [r["explanation"] for r in rows] == ["the school is S12."]


@pytest.mark.embeddings
def test_the_embedded_model_named_by_base_url_is_recorded_as_embedded(tmp_path, monkeypatch):
    """The main job names its embedded server by base URL (as `cresowlve synth` after `serve-local`
    does): its build's summary.json said ``embedded: {verbaliser: false, solver: false}`` although
    both roles ran on gemma3-270m, and `cresowlve synth` printed no banner."""
    with FakeServer(answers=base_answers) as srv:
        monkeypatch.setenv(PROVIDERS_ENV, f"{srv.base_url.split('/')[2]}=embedded")
        c = cfg(tmp_path, verbaliser_model="gemma3-270m", verbaliser_base_url=srv.base_url,
                solver_model="gemma3-270m", solver_base_url=srv.base_url)
        res = run_synth(c, source=graph(), progress=False)
    assert res.embedded == {"verbaliser": True, "solver": True}
    summary = json.loads((tmp_path / "build" / "summary.json").read_text())
    assert summary["embedded"] == {"verbaliser": True, "solver": True}
