"""CREATE on a base model: few-shot completion prompts for generation and both judges."""

from __future__ import annotations

import json

import pytest
from create_fakes import EP, Q, records

from cresowlve_core.create import generate as cg
from cresowlve_core.create import judges as cj
from cresowlve_core.create import score as cs
from cresowlve_core.llm.base_model import is_base_model
from cresowlve_core.llm.types import Endpoint

# a continuation as the embedded Gemma 3 270M wrote it (07_create, Max von Laue -> chemist)
GEMMA = ('\n"1": [["Max von Laue", "physicist", "Nobel Prize"], ["John Lang", "physicist", "Nobel Prize"], '
         '["John Lang", "occupation", "chemist"]],\n"2": [["Max von Laue", "chemist", "Nobel Prize"], '
         '["Paul Erdhal", "physicist", "Nobel Prize"], ["Paul Erdhal", "occupation", "chemist"]]\n}')
# what it wrote to the chat prompt: the prompt copied back
ECHO = "Query: What are different ways of connecting Max von Laue ...\nTask: Identify how two real-world entities"


def test_fewshot_continuation_parses_into_paths():
    whole = cg.parse_fewshot_paths(GEMMA)
    assert whole.status == "ok" and len(whole.paths) == 2
    assert whole.paths[0][0] == ["Max von Laue", "physicist", "Nobel Prize"]
    # cut off by the token budget in the middle of path 3: the complete ones are kept
    cut = cg.parse_fewshot_paths(GEMMA[:-2] + ',\n"3": [["Max von Laue", "friend of", "Ot')
    assert cut.status == "partial" and len(cut.paths) == 2
    # stopped at "</answer>": the continuation ends with the closing brace
    assert len(cg.parse_fewshot_paths('"1": [["a", "r", "b"], ["b", "s", "c"]]}').paths) == 1
    for junk in (ECHO, "", None, "\n\n"):
        assert cg.parse_fewshot_paths(junk).paths == [] and cg.parse_fewshot_paths(junk).status == "unparseable"
    assert cg.parse_answer(ECHO).paths == []  # the chat parser on today's echo: nothing either


def test_judge_lines_parse_or_stay_unscored():
    assert [cj.parse_size_line(t) for t in (" 3000", " about 3,000 people\nTriple: (x, y, z)", "\n 12")] == [3000, 3000, 12]
    assert [cj.parse_size_line(t) for t in ("", None, " many", "Triple: (a, b, c)")] == [None] * 4
    assert [cj.parse_holds_line(t) for t in (" yes", " No.", "\nyes, it holds")] == [1.0, 0.0, 1.0]
    assert [cj.parse_holds_line(t) for t in ("", None, " maybe", " not sure", "Triple: (a, b, c)")] == [None] * 5
    assert cj.triple_for_prompt(["A\nTriple: (x", "r", "B"]) == "(A Triple: (x, r, B)"


def test_a_base_model_judge_saying_no_idea_leaves_the_triple_unscored_not_hallucinated():
    """" no idea" after "Holds:" was read by its first word as the verdict "no": the triple scored
    hallucinated and counted as scored ("factuality 10 of 10", exit 0) although the judge said it
    does not know, as " not sure" (unscored) does. "No, ..." and "no" stay verdicts."""
    assert [cj.parse_holds_line(t) for t in (" no idea", " No clue.", " no answer")] == [None] * 3
    assert [cj.parse_holds_line(t) for t in (" no", " No, Paris is not his birthplace", " no it does not")] == [0.0] * 3


def test_prompt_choice_follows_the_profile():
    embedded = Endpoint("http://127.0.0.1:9/v1", "gemma3-270m", provider="embedded")
    assert is_base_model(embedded) and not is_base_model(EP)
    q = Q[1]
    chat, chat_tag = cg.generation_messages(q)
    few, few_tag = cg.generation_messages(q, base_model=True)
    assert chat_tag == "create_generate@1" and chat[0]["content"].startswith("Query: " + q.query)
    assert few_tag == "create_generate_fewshot@1" and few[0]["content"].endswith(f"Start: {q.entity_a}\n"
                                                                                  f'Target: [?, "{q.rel_b}", '
                                                                                  f'"{q.entity_b}"]\nPaths: <answer>{{')
    assert cs.judge_prompts(False) == ["create_specificity@1", "create_factuality@1"]
    assert cs.judge_prompts(True) == ["create_specificity_fewshot@1", "create_factuality_fewshot@1"]
    msgs, tag = cj.fewshot_messages(cj.FACTUALITY_FEWSHOT_PROMPT, ["A", "r", "B"])
    assert tag == "create_factuality_fewshot@1" and msgs[0]["content"].endswith("Triple: (A, r, B)\nHolds:")
    with pytest.raises(ValueError, match="iterate.*chat model"):
        cg.generate(None, embedded, "/nonexistent/never-made", variation="iterate", limit=1, progress=False)


def _base_model_reply(req):
    """A base model behind /v1/completions: two valid paths per query; specificity 50 per triple;
    factuality yes, except an unreadable verdict for triples whose relation is "knows"."""
    if req.path != "/completions":
        return "chat prompts are not for a base model"
    prompt = req.prompt
    if prompt.endswith("Paths: <answer>{"):
        a = prompt.rsplit("Start: ", 1)[1].split("\n", 1)[0]
        rel, b = json.loads(prompt.rsplit("Target: [?, ", 1)[1].split("\n", 1)[0][:-1].join("[]"))
        return (f'\n"1": {json.dumps([[a, "knows", "Mid"], ["Mid", rel, b]])},\n'
                f'"2": {json.dumps([[a, "award received", "Prize"], ["Other", "award received", "Prize"], ["Other", rel, b]])}'
                "\n}")
    if prompt.endswith("Class size:"):
        return " 50\n\nTriple: (echo, echo, echo)"
    if prompt.endswith("Holds:"):
        return " perhaps" if ", knows, " in prompt.rsplit("Triple: ", 1)[1] else " yes"
    return "?"


@pytest.mark.embeddings
def test_base_model_end_to_end_over_completions_and_resume_sends_nothing(tmp_path, tmp_cache):
    from fakeserver import FakeServer

    with FakeServer(answers=_base_model_reply) as srv:
        ep = Endpoint(srv.base_url, "gemma3-270m", provider="embedded")
        g = cg.generate(None, ep, tmp_path / "run", limit=2, progress=False)
        s = cs.score(tmp_path / "run", ep, progress=False)
        assert {r.path for r in srv.requests} == {"/completions"}
        gen_bodies = [r.body for r in srv.requests if r.prompt.endswith("<answer>{")]
        assert len(gen_bodies) == 2 and all(b["stop"] == ["\n\n", "</answer>"] for b in gen_bodies)
        judge_bodies = [r.body for r in srv.requests if not r.prompt.endswith("<answer>{")]
        assert len(judge_bodies) == 2 * 5 * 2  # 2 queries x 5 triples x 2 judges, one call per triple
        assert all(b["max_tokens"] == cj.FEWSHOT_JUDGE_MAX_TOKENS and b["stop"] == ["\n\n"] for b in judge_bodies)
        n = srv.total
        # resume: the same run directories again send nothing
        cg.generate(None, ep, tmp_path / "run", limit=2, progress=False)
        again = cs.score(tmp_path / "run", ep, progress=False)
        assert srv.total == n == 22
    assert g.n_ok == 2 and g.n_paths == 4 and g.n_unparseable == 0
    assert s.n_valid == 4 and s.n_judged == 4 and s.n_triples == 10
    assert s.n_specificity_scored == 10 and s.n_factuality_scored == 8  # the two "knows" triples: unscored
    assert again.n_factuality_scored == 8
    judged = records(tmp_path / "run" / "score", "judgments.jsonl")
    knows = next(j for j in judged if j["path"][0][1] == "knows")
    assert knows["factuality_verdicts"] == [None, 1.0] and "unscored_1_of_2" in knows["factuality_flags"]
    assert knows["factuality"] == [0.0, 1.0] and knows["specificity_sizes"] == [50, 50]
    assert s.n_factual == 2  # a path with an unscored triple is not counted factual
    gm = json.loads((tmp_path / "run" / "manifest.json").read_text())
    sm = json.loads((tmp_path / "run" / "score" / "manifest.json").read_text())
    assert gm["prompts"] == ["create_generate_fewshot@1"]
    assert sorted(sm["prompts"]) == ["create_factuality_fewshot@1", "create_specificity_fewshot@1"]
    assert sm["max_tokens"] == cj.FEWSHOT_JUDGE_MAX_TOKENS


@pytest.mark.parametrize(("given", "sent"), [([], cg.FEWSHOT_MAX_TOKENS), (["--max-tokens", "300"], 300)])
def test_cli_generate_gives_a_base_model_a_small_budget_unless_told(tmp_path, tmp_cache, monkeypatch, capsys, given, sent):
    """``cresowlve create generate`` on a base model: 4096 tokens were one path repeated for minutes."""
    from fakeserver import FakeServer

    from cresowlve_core.cli import main
    from cresowlve_core.llm.profiles import PROVIDERS_ENV

    with FakeServer(answers=_base_model_reply) as srv:
        monkeypatch.setenv(PROVIDERS_ENV, f"{srv.base_url.split('/')[2]}=embedded")
        code = main(["create", "generate", "--model", "gemma3-270m", "--base-url", srv.base_url,
                     "--run-dir", str(tmp_path / "run"), "--limit", "1", *given])
        assert code == 0 and [r.body["max_tokens"] for r in srv.requests] == [sent]
    err = capsys.readouterr().err
    assert (f"--max-tokens {cg.FEWSHOT_MAX_TOKENS}" in err) == (not given)


def test_cli_score_says_a_base_model_judge_does_not_use_the_max_tokens_it_was_given(tmp_path, tmp_cache, monkeypatch,
                                                                                   capsys):
    """``create score --max-tokens 300`` on a base-model judge sent 12 tokens per triple (its
    few-shot judges' budget) and said nothing: the option was silently another. It now says so."""
    from fakeserver import FakeServer

    from cresowlve_core.cli import main
    from cresowlve_core.llm.profiles import PROVIDERS_ENV

    with FakeServer(answers=_base_model_reply) as srv:
        monkeypatch.setenv(PROVIDERS_ENV, f"{srv.base_url.split('/')[2]}=embedded")
        run = str(tmp_path / "run")
        assert main(["create", "generate", "--model", "gemma3-270m", "--base-url", srv.base_url,
                     "--run-dir", run, "--limit", "1"]) == 0
        n = srv.total
        capsys.readouterr()
        main(["create", "score", "--run-dir", run, "--judge-model", "gemma3-270m", "--judge-base-url", srv.base_url,
              "--max-tokens", "300"])
        assert {r.body["max_tokens"] for r in srv.requests[n:]} == {cj.FEWSHOT_JUDGE_MAX_TOKENS}
    err = capsys.readouterr().err
    assert (f"gemma3-270m is a base model: its judges answer one triple per call with {cj.FEWSHOT_JUDGE_MAX_TOKENS} "
            "tokens; --max-tokens 300 is not used") in err
