"""Lexical substitution, the perturbation protocol of a base-model perturber:
the words picked, the synonyms read and rejected, the rewrites built (pure); then, against the fake
server with the embedded profile, the whole pipeline: ``/completions`` only, every word→synonym
call recorded, the quizzes answered, and a re-run sends 0 requests."""

from __future__ import annotations

import json
import re

import pytest
from fakeserver import FakeServer

from cresowlve_core.contamination import report
from cresowlve_core.contamination import substitute as sub
from cresowlve_core.contamination.perturb import CHAT_PROTOCOL, rejections
from cresowlve_core.contamination.pipeline import Role, run_contamination
from cresowlve_core.llm.profiles import PROVIDERS_ENV
from cresowlve_core.runtime import RunDir

RU = "По словам американских учёных, складки на мокрых пальцах выполняют ту же функцию, что и ИКС. Назовите ИКС."
EN = "Wolf Schneider writes that one crystal of IT deprived thousands of Swiss people of their jobs. Name IT."


def test_candidate_words_skip_capitals_stop_words_short_words_and_repeats():
    words = {c.word for c in sub.candidate_words(RU + " Мокрых мокрых", 0, "ru", "chgk_1", limit=100)}
    # ИКС (placeholder), По/Назовите (capitalised), на/ту/же/что/и (short), Мокрых (capital) never; мокрых once
    assert words == {"словам", "американских", "учёных", "складки", "мокрых", "пальцах", "выполняют", "функцию"}
    en = {c.word for c in sub.candidate_words(EN, 0, "en", "chgk_2", limit=100)}
    assert en == {"writes", "crystal", "deprived", "thousands", "people", "jobs"}  # Swiss, IT, Name, that/their: no


def test_candidate_words_are_seeded_and_point_at_the_word():
    a = sub.candidate_words(RU, 0, "ru", "chgk_1")
    assert a == sub.candidate_words(RU, 0, "ru", "chgk_1")  # deterministic
    orders = {tuple(c.word for c in sub.candidate_words(RU, s, "ru", "chgk_1")) for s in range(5)}
    assert len(orders) > 1  # the seed changes the order
    assert all(RU[c.start:c.end] == c.word for c in a) and len(a) == 8 == sub.MAX_WORDS
    assert len(sub.candidate_words(RU, 0, "ru", "chgk_1", limit=3)) == 3


@pytest.mark.parametrize("raw, expected", [
    (" огромный, крупный", ["огромный", "крупный"]),
    ("\n «влажных»; сырых.", ["влажных", "сырых"]),
    ("", [""]),
    (None, [""]),
])
def test_synonym_options_read_the_first_line(raw, expected):
    assert sub.synonym_options(raw) == expected


@pytest.mark.parametrize("word, synonym, kind", [
    ("мокрых", "", "empty"),
    ("мокрых", "время суток", "not_one_word"),
    ("мокрых", "влажн0", "not_one_word"),
    ("мокрых", "Мокрых", "same_word"),
    ("времени", "время", "same_stem"),
    ("самолетов", "самолетики", "same_stem"),
    ("небо", "небеса", "same_stem"),  # a 4-letter word: 3 shared letters are its stem
    ("мокрых", "wet", "other_script"),
    ("мокрых", "влажных", None),
    ("writes", "notes", None),
    ("что-то", "нечто", None),
])
def test_synonym_problem(word, synonym, kind):
    assert sub.synonym_problem(word, synonym) == kind


def test_pick_synonym_takes_the_first_usable_item_and_keeps_what_it_passed_over():
    assert sub.pick_synonym("заменили", " заменили, Поменяли") == (
        "поменяли", [{"option": "заменили", "kind": "same_word"}])
    assert sub.pick_synonym("слово", " слово, слово") == (
        None, [{"option": "слово", "kind": "same_word"}] * 2)


def test_build_rewrites_one_swap_each_and_the_validator_accepts_them():
    cands = sub.candidate_words(RU, 0, "ru", "chgk_1")
    swaps = [(c, f"син{k}") for k, c in enumerate(cands[:3])]
    rewrites = sub.build_rewrites(RU, swaps)
    assert rewrites is not None and len(set(rewrites)) == 3
    for (c, syn), r in zip(swaps, rewrites, strict=True):
        assert r == RU[:c.start] + syn + RU[c.end:] and r != RU
        assert sum(a != b for a, b in zip(r.split(), RU.split(), strict=True)) == 1  # one word differs
    assert rejections(RU, rewrites) == []  # placeholders, punctuation and length kept
    assert sub.build_rewrites(RU, swaps[:2]) is None


def test_synonym_params_use_completions_with_a_short_budget():
    from cresowlve_core.runtime import ClientOptions

    p = sub.synonym_params(ClientOptions(max_tokens=512).gen_params())
    assert p.api == "completions" and p.max_tokens == sub.SYNONYM_MAX_TOKENS == 12 and p.extra["stop"] == ["\n"]


# ------------------------------------------------------------------ end to end, base-model profile

N = 4  # items, all "wrong in both"; the last one has too few swappable words


def ru_question(i: int) -> str:
    return (f"Вопрос номер {i}: этот знаменитый учёный однажды сказал, что ИКС важнее знания. Назовите ИКС."
            if i < N - 1 else "Назовите ИКС.")


def write_runs(root, n: int = N) -> None:
    from cresowlve_core.items import Item, ItemView

    items = [Item(id=f"chgk_{i:010x}", difficulty=1, en=ItemView(question=f"Puzzle {i}?", answer="a"),
                  ru=ItemView(question=ru_question(i), answer="о")) for i in range(n)]
    (root / "items.jsonl").write_text("".join(json.dumps(it.model_dump(), ensure_ascii=False) + "\n" for it in items))
    for lang in ("en", "ru"):
        d = root / "runs" / f"m__{lang}"
        d.mkdir(parents=True)
        (d / "manifest.json").write_text(json.dumps({
            "run_id": d.name, "kind": "eval", "model": "m", "base_url": "http://127.0.0.1:1/v1", "lang": lang,
            "items": str(root / "items.jsonl"), "n_items": n, "finished_at": "2026-01-01T00:00:00Z"}))
        (d / "responses.jsonl").write_text("".join(json.dumps({
            "id": it.id, "lang": lang, "status": "ok", "model": "m", "prediction": "x", "em_strict": False,
            "em_lenient": False, "difficulty": 1}) + "\n" for it in items))


def base_model_answer(req) -> str:
    p = req.prompt
    assert req.path == "/completions", req.path  # synonyms, quiz letters, continuations: never chat to a base model
    if p.startswith("Словарь синонимов"):
        word = p.rsplit("\n", 1)[1].removesuffix(" —")
        return " сказал, сказал" if word == "сказал" else f" {word[::-1]}, другое\n"  # a copy, then a swap
    if p.endswith("D) None of the provided options.\nAnswer:"):
        return " B"
    return " и так далее"


@pytest.fixture
def base_server(monkeypatch):
    with FakeServer(answers=base_model_answer) as srv:
        monkeypatch.setenv(PROVIDERS_ENV, f"{srv.base_url.split('/')[2]}=embedded")
        yield srv


def test_base_model_pipeline_swaps_words_records_every_call_quizzes_and_resumes(tmp_path, base_server):
    write_runs(tmp_path)
    role = Role("gemma3-270m", base_server.base_url)
    # one request at a time: a word asked for two questions is then always answered by the client's cache
    kw = dict(out_dir=tmp_path / "out", perturber=role, quiz_taker=role, make_demo=False, concurrency=1)
    c = run_contamination(str(tmp_path / "runs" / "*"), **kw)
    first = base_server.total
    base_server.reset()
    run_contamination(str(tmp_path / "runs" / "*"), **kw)
    assert base_server.total == 0  # every call persisted: the re-run sends nothing

    assert c.perturbation is not None and c.perturbation["protocol"] == sub.PROTOCOL != CHAT_PROTOCOL
    assert c.perturbation["prompts"] == ["contamination_synonym_fewshot_ru@1"] and c.perturbation["n_usable"] == N - 1
    folder = tmp_path / "out" / "perturb" / "gemma3-270m__ru__lexical-substitution"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["identity"] == {"protocol": sub.PROTOCOL} and manifest["max_tokens"] == 12
    recs = RunDir(folder).latest("perturbations.jsonl", lambda r: tuple(r["key"]))
    calls, asked = 0, set()
    for i in range(N - 1):
        rec = recs[("ru", f"chgk_{i:010x}")]
        assert rec["protocol"] == sub.PROTOCOL and rec["problems"] == []
        swapped = [s for s in rec["synonyms"] if s["synonym"]]
        assert len(swapped) == 3 and all(s["synonym"] == s["word"][::-1] for s in swapped)
        copied = [s for s in rec["synonyms"] if not s["synonym"]]  # "сказал" answered with itself: recorded
        assert all(s["word"] == "сказал" and s["passed_over"][0]["kind"] == "same_word" for s in copied)
        assert all(s["raw"] for s in rec["synonyms"])
        for s, rewrite in zip(swapped, rec["perturbations"], strict=True):
            assert re.search(rf"\b{s['synonym']}\b", rewrite) and s["word"] not in rewrite.split()
        calls += len(rec["synonyms"])
        asked |= {s["word"] for s in rec["synonyms"]}
    short = recs[("ru", f"chgk_{N - 1:010x}")]
    assert short["perturbations"] is None and short["synonyms"] == []  # no swappable word: no call
    assert [x["kind"] for x in short["rejections"]] == ["too_few_synonyms"]
    (r,) = c.results
    assert r.not_quizzable["id"].tolist() == [f"chgk_{N - 1:010x}"]
    assert r.not_quizzable["reason"].iloc[0].startswith("0 usable synonym(s) from 0 word(s) asked")
    assert r.bdq_counts == {"A": 0, "B": N - 1, "C": 0, "D": 0, "invalid": 0, "withheld": 0, "cut_off": 0}  # the quizzes were answered
    assert len(r.bcq) == 3 * (N - 1) and r.non_preferred == ["A", "C"]
    quizzes = (N - 1) + 3 * (N - 1)
    # a word asked for two questions is one request (the same prompt, cached); no completion test of the short one
    assert first == len(asked) + quizzes + 2 * (N - 1) and len(asked) < calls
    done = [p for p in (tmp_path / "out").rglob("completion/manifest.json")]
    assert len(done) == 1 and sorted(json.loads(done[0].read_text())["prompts"]) == [
        "contamination_complete_general_base@1", "contamination_complete_guided_base@1"]
    conts = [json.loads(x) for x in (done[0].parent / "completions.jsonl").read_text().splitlines()]
    assert len(conts) == 2 * (N - 1) and {x["continuation"] for x in conts} == {"и так далее"}
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["perturbation"]["protocol"] == sub.PROTOCOL and summary["perturbation"]["n_model_calls"] == calls
    assert "swaps" not in summary["perturbation"]  # the calls are in perturbations.jsonl and the report
    swaps = c.perturbation["swaps"]
    assert len(swaps) == calls and (swaps["synonym"] == "").sum() == calls - 3 * (N - 1)
    assert swaps.loc[swaps["word"] == "сказал", "passed_over"].str.contains("same_word").all()
    assert report.perturbation_section(c)[r.config]["protocol"] == sub.PROTOCOL
    text = report.protocol_text(c.perturbation)
    assert "lexical-substitution" in text and "contamination_synonym_fewshot_ru@1" in text
    assert f"{calls} model call(s)" in text and "differs from the paper" in text
