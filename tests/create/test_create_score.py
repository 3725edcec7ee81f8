"""CREATE scoring on the stage runtime: judging, utilities, resume, old run directories, user runs."""

from __future__ import annotations

import json
import math

import pytest
from create_fakes import EP, FakeClient, Q, answer_for, judge_reply, one_hot, records

from cresowlve_core.create import generate as cg
from cresowlve_core.create import score as cs
from cresowlve_core.create.records import score_line
from cresowlve_core.create.utility import creative_utility
from cresowlve_core.llm.types import Endpoint
from cresowlve_core.runtime import RunDir, RunDirError


def test_score_judges_valid_paths_and_computes_utility(tmp_path):
    client = FakeClient()
    cg.generate(None, EP, tmp_path, limit=2, client=client, progress=False)
    n_gen = len(client.calls)
    s = cs.score(tmp_path, EP, client=client, embedder=one_hot, progress=False)
    judge_calls = client.calls[n_gen:]
    assert len(judge_calls) == 2 * 2 * 2  # 2 queries x 2 valid paths x 2 judges
    assert all(c[1].temperature == 0.0 for c in judge_calls)
    assert (s.n_paths, s.n_valid, s.n_factual, s.n_to_judge, s.n_judged, s.n_not_judged) == (6, 4, 4, 4, 4, 0)
    assert s.judge_cost.usd == pytest.approx(0.008) and s.generation_cost.usd == pytest.approx(0.02)
    sd = tmp_path / "score"
    m = json.loads((sd / "manifest.json").read_text())
    assert m["kind"] == "create_score" and m["items"] == "fake-model__original"
    assert m["prompts"] == ["create_factuality@1", "create_specificity@1"] and m["identity"]["judge_invalid"] is False
    judgments = records(sd, "judgments.jsonl")
    assert len(judgments) == 4 and all(j["status"] == "ok" and j["specificity"] == [4.0] * len(j["path"])
                                       for j in judgments)
    rows = json.loads((sd / "scores.json").read_text())
    # per query: strengths 4 and 4, one-hot distances 1 -> 4 + 4 (second path undiscounted)
    assert [r["utility"]["0.9"] for r in rows] == pytest.approx([8.0, 8.0])
    assert json.loads((sd / "summary.json").read_text())["n_judged"] == 4
    sets = cs.scored_sets_from_run(tmp_path)
    first = sets[0]
    assert first.validity == [1, 1, 0] and first.config == "fake-model__original" and first.judge == "fake-model"
    assert creative_utility(first.paths, first.specificity, first.factuality, first.validity,
                            embedder=one_hot) == pytest.approx(8.0)
    # re-scoring reuses the recorded judgments
    cs.score(tmp_path, EP, client=client, embedder=one_hot, progress=False)
    assert len(client.calls) == n_gen + 8


def test_a_second_judge_goes_to_its_own_score_dir(tmp_path):
    client = FakeClient()
    cg.generate(None, EP, tmp_path, limit=1, client=client, progress=False)
    cs.score(tmp_path, EP, client=client, embedder=one_hot, progress=False)
    other = Endpoint("http://fake.invalid/v1", "judge-2")
    with pytest.raises(ValueError, match="another configuration"):
        cs.score(tmp_path, other, client=client, embedder=one_hot, progress=False)
    s = cs.score(tmp_path, other, score_dir=tmp_path / "score-judge-2", client=client, embedder=one_hot, progress=False)
    assert s.n_judged == 2 and cs.judge_model_of(tmp_path, tmp_path / "score-judge-2") == "judge-2"


def test_generate_and_score_end_to_end_over_http(tmp_path, tmp_cache):
    fakeserver = pytest.importorskip("fakeserver")

    def reply(req):
        if "Path: " in req.prompt:
            return judge_reply(req.prompt)
        if "Query: " in req.prompt:
            return "Sure! " + answer_for(req.prompt)
        return "?"

    with fakeserver.FakeServer(answers=reply) as srv:
        ep = Endpoint(srv.base_url, "fake-model")
        g = cg.generate(None, ep, tmp_path / "run", limit=2, progress=False)
        s = cs.score(tmp_path / "run", ep, embedder=one_hot, progress=False)
        assert g.n_ok == 2 and s.n_valid == 4
        assert [round(u, 6) for u in s.mean_utility.values()] == [8.0, 8.0]
        assert srv.total == 2 + 8
        # the same generation in a new run directory is served from the response cache
        g2 = cg.generate(None, ep, tmp_path / "run2", limit=2, progress=False)
        assert srv.total == 2 + 8 and g2.generation_cost.n_cached == 2
    sets = cs.scored_sets_from_run(tmp_path / "run")
    assert len(sets) == 2 and all(sum(x.validity) == 2 for x in sets)


def _legacy_run(d, *, judged: bool = True):
    """A run directory as the pre-runtime code wrote it (dict manifest, kind "create")."""
    d.mkdir(parents=True)
    q = Q[0]
    manifest = {"kind": "create", "model": "old-model", "base_url": "http://old.invalid/v1", "api_key_env": None,
                "variation": "original", "n_samples": 1, "n_rounds": 1, "seed": 0, "temperature": 0.7,
                "max_tokens": 4096, "effort": None, "queries_path": "data/create/queries.jsonl", "limit": 1,
                "n_queries": 1, "query_ids": [q.id], "concurrency": 8, "prompts": ["create_generate@1"],
                "git_sha": "abc", "packages": {}, "started_at": "2026-01-01T00:00:00+00:00",
                "finished_at": "2026-01-01T00:01:00+00:00", "summary": {"n_ok": 1}}
    (d / "manifest.json").write_text(json.dumps(manifest))
    from cresowlve_core.create.paths import parse_answer

    parsed = parse_answer(answer_for(q.query))
    resp = {"query_id": q.id, "sample": 0, "round": 0, "seed": 0, "status": "ok", "error": None,
            "raw_output": answer_for(q.query), "thoughts": None,
            "usage": {"input_tokens": 10, "output_tokens": 20, "reasoning_tokens": None}, "cost": 0.01,
            "latency_s": 1.0, "cached": False, "parse_status": parsed.status, "parse_flags": parsed.flags,
            "n_paths": len(parsed.paths), "paths": parsed.paths}
    (d / "responses.jsonl").write_text(json.dumps(resp) + "\n")
    if judged:
        lines = []
        for i, p in enumerate(parsed.paths[:2]):  # the two valid paths
            lines.append(json.dumps({
                "query_id": q.id, "path_key": cs.path_key(p), "path_index": i, "path": p, "valid": True,
                "validity_reasons": [], "specificity": [5.0] * len(p), "specificity_sizes": [3] * len(p),
                "specificity_flags": [], "specificity_raw": "[]", "factuality": [1.0] * len(p),
                "factuality_flags": [], "factuality_raw": "{}", "cost": 0.002, "cached": False,
                "usage": {"specificity": {}, "factuality": {}}, "error": None}))
        (d / "judgments.jsonl").write_text("\n".join(lines) + "\n")
        (d / "score_manifest.json").write_text(json.dumps({
            "kind": "create-score", "model": "old-judge", "base_url": "http://old.invalid/v1", "seed": 0,
            "max_tokens": 4096, "judge_invalid": False, "prompts": ["create_factuality@1", "create_specificity@1"]}))
    return d


def test_old_run_directories_load_rescore_and_resume(tmp_path):
    old = _legacy_run(tmp_path / "old")
    (g,) = cg.load_generations(old)
    assert len(g.paths) == 3 and g.n_calls_ok == 1
    (s,) = cs.scored_sets_from_run(old)
    assert s.config == "old-model__original" and s.judge == "old-judge" and s.specificity[0] == [5.0, 5.0]
    # re-scoring with the same judge adopts the old judgments: no judge call
    client = FakeClient()
    summary = cs.score(old, Endpoint("http://new.invalid/v1", "old-judge"), client=client, embedder=one_hot,
                       progress=False)
    assert client.calls == [] and summary.n_judged == 2 and summary.judge_cost.usd == pytest.approx(0.004)
    # generating more queries into it upgrades the manifest and resumes: only the new query is sent
    more = cg.generate(None, Endpoint("http://old.invalid/v1", "old-model"), old, limit=2, client=client,
                       progress=False)
    assert more.n_ok == 2 and len(client.calls) == 1
    m = json.loads((old / "manifest.json").read_text())
    assert m["kind"] == "create_generate" and m["identity"]["variation"] == "original" and m["items"] == "shipped"


def test_user_runs_are_marked_and_unscored_ones_refused(tmp_path):
    client = FakeClient()
    cg.generate(None, EP, tmp_path / "runs" / "a", limit=2, client=client, progress=False)
    cs.score(tmp_path / "runs" / "a", EP, client=client, embedder=one_hot, progress=False)
    _legacy_run(tmp_path / "runs" / "b")
    sets = cs.load_user_runs([str(tmp_path / "runs" / "*")])
    assert {x.config for x in sets} == {"fake-model__original (yours: a)", "old-model__original (yours: b)"}
    assert all(x.origin == "yours" for x in sets) and {x.model for x in sets} == {"fake-model", "old-model"}
    assert cs.load_user_runs([]) == []
    with pytest.raises(FileNotFoundError, match="matches no run directory"):
        cs.load_user_runs([str(tmp_path / "nowhere" / "*")])
    _legacy_run(tmp_path / "unscored", judged=False)
    with pytest.raises(ValueError, match="not scored yet"):
        cs.load_user_runs([str(tmp_path / "unscored")])
    # judged into a --score-dir of its own: the run is not called unjudged without saying where it looked
    cg.generate(None, EP, tmp_path / "c", limit=2, client=client, progress=False)
    cs.score(tmp_path / "c", EP, score_dir=tmp_path / "elsewhere", client=client, embedder=one_hot, progress=False)
    with pytest.raises(ValueError) as err:
        cs.load_user_runs([str(tmp_path / "c")])
    assert f"no judgments in {tmp_path / 'c' / 'score'}" in str(err.value)
    assert "a run scored into another --score-dir is not read here" in str(err.value)


def test_a_user_run_of_another_stage_or_a_score_dir_is_named_so_not_called_unscored(tmp_path):
    """`user_runs` naming an evaluation run, a `create score` directory or a folder of runs said
    "is not scored yet; run `cresowlve create score --run-dir <it>`", which then refuses it. Each
    now says what it is."""
    client = FakeClient()
    cg.generate(None, EP, tmp_path / "runs" / "a", limit=1, client=client, progress=False)
    cs.score(tmp_path / "runs" / "a", EP, client=client, embedder=one_hot, progress=False)
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "manifest.json").write_text(json.dumps({"kind": "eval", "model": "m"}))
    for d, said in ((tmp_path / "eval", "holds a 'eval' run, not a CREATE generation run"),
                    (tmp_path / "runs" / "a" / "score", "holds a 'create_score' run, not a CREATE generation run"),
                    (tmp_path / "runs", "not a CREATE run directory (no manifest.json)")):
        with pytest.raises((ValueError, FileNotFoundError)) as err:
            cs.load_user_runs([str(d)])
        assert said in str(err.value) and "not scored yet" not in str(err.value)


def test_a_record_edited_into_another_shape_is_one_error_naming_its_file_and_line(tmp_path):
    """A judgment whose `specificity` is a string, or a response without `query_id` (valid JSON, the
    wrong shape), ended `create score` and 07_create's `user_runs` in a pydantic traceback called a
    bug. Each is now one error naming the file, the line and the field."""
    from cresowlve_core.failures import InputError

    client = FakeClient()
    run = tmp_path / "mine"
    cg.generate(None, EP, run, limit=2, client=client, progress=False)
    cs.score(run, EP, client=client, embedder=one_hot, progress=False)

    def damage(path, change):
        lines = path.read_text().splitlines()
        rec = json.loads(lines[1])
        change(rec)
        lines[1] = json.dumps(rec)
        path.write_text("\n".join(lines) + "\n")

    judgments = (run / "score" / "judgments.jsonl").read_text()
    damage(run / "score" / "judgments.jsonl", lambda r: r.update(specificity="high"))
    with pytest.raises(InputError, match=r"judgments\.jsonl:2: the record cannot be read \(specificity: .*'high'"):
        cs.load_user_runs([str(run)])
    with pytest.raises(InputError, match=r"judgments\.jsonl:2: "):
        cs.score(run, EP, client=client, embedder=one_hot, progress=False)
    (run / "score" / "judgments.jsonl").write_text(judgments)
    damage(run / "responses.jsonl", lambda r: r.pop("query_id"))
    with pytest.raises(InputError, match=r"responses\.jsonl:2: the record cannot be read \(no 'query_id'\)"):
        cs.load_user_runs([str(run)])


def test_a_damaged_score_manifest_of_an_old_run_is_one_error_naming_it(tmp_path):
    """A run scored before the runtime whose `score_manifest.json` is not JSON, or not an object,
    ended `user_runs` (and `create score`) in a JSONDecodeError / AttributeError traceback. Now
    one error names the file."""
    from cresowlve_core.failures import InputError

    for name, text in (("torn", "{not json"), ("list", "[1, 2]")):
        _legacy_run(tmp_path / name)
        (tmp_path / name / "score_manifest.json").write_text(text)
        with pytest.raises(InputError, match=r"score_manifest\.json: not a valid score manifest"):
            cs.load_user_runs([str(tmp_path / name)])
    with pytest.raises(InputError, match=r"score_manifest\.json: not a valid score manifest"):
        cs.score(tmp_path / "list", EP, client=FakeClient(), embedder=one_hot, progress=False)


def test_judgments_off_the_judges_scale_or_not_one_per_triple_are_refused_not_ranked(tmp_path):
    """A judgments.jsonl edited to specificity 9 (the scale is 0-5) ranked the run at 18.0 instead of
    8.0; one with a single specificity score for a 2-triple path ranked it at 0.0. The recorded sets
    were checked for both; a scored run's are now too: one error naming the run and the query."""
    from cresowlve_core.failures import InputError

    client = FakeClient()
    run = tmp_path / "mine"
    cg.generate(None, EP, run, limit=2, client=client, progress=False)
    cs.score(run, EP, client=client, embedder=one_hot, progress=False)
    path = run / "score" / "judgments.jsonl"
    good = path.read_text()
    for change, said in ((lambda r: r.update(specificity=[9.0] * len(r["path"])), "specificity 9.0 is not a score 0-5"),
                         (lambda r: r.update(specificity=r["specificity"][:1]), "1 specificity and")):
        recs = [json.loads(x) for x in good.splitlines()]
        for r in recs:
            change(r)
        path.write_text("".join(json.dumps(r) + "\n" for r in recs))
        with pytest.raises(InputError, match=f"the judgments of query .* cannot be used .*{said}"):
            cs.load_user_runs([str(run)])


def test_user_runs_rank_beside_the_recorded_configurations(tmp_path):
    from cresowlve_core.create import report as cr

    client = FakeClient()
    cg.generate(None, EP, tmp_path / "mine", limit=2, client=client, progress=False)
    cs.score(tmp_path / "mine", EP, client=client, embedder=one_hot, progress=False)
    loaded = cr.load_sets(None, [str(tmp_path / "mine")])
    assert loaded.user_configs == ["fake-model__original (yours: mine)"] and not loaded.embedded
    assert "of which 1 are your runs" in loaded.message
    assert loaded.user_table is not None and loaded.user_table.iloc[0]["judge"] == "fake-model"
    rep = cr.analyse(loaded.sets, embedder=one_hot)
    board = rep.leaderboard(n_boot=50)
    assert len(board) == 9 and set(board.origin) == {"recorded", "yours"}
    mine = board[board.origin == "yours"].iloc[0]
    assert mine.config == "fake-model__original (yours: mine)" and mine.n_queries == 2
    # the authors' validity flags are compared with our check on the recorded sets only
    assert set(cr.validity_agreement(loaded.sets).config) == set(board[board.origin == "recorded"].config)
    chart = cr.leaderboard_chart(board).to_dict()
    assert "your run" in json.dumps(chart)


def test_a_query_no_other_configuration_answered_has_no_distinctiveness_not_the_largest(tmp_path):
    """Your run answers 2 queries, the recorded sets ranked are those of the first 1: on the second
    no other configuration has a path to be distinct from. Before: ν = 1 (the largest) for each of its
    paths, averaged into your ν(U) over 2 queries; now that query has no ν and is counted apart."""
    from cresowlve_core.create import report as cr

    client = FakeClient()
    cg.generate(None, EP, tmp_path / "mine", limit=2, client=client, progress=False)
    cs.score(tmp_path / "mine", EP, client=client, embedder=one_hot, progress=False)
    loaded = cr.load_sets(None, [str(tmp_path / "mine")], n_queries=1)
    dist = cr.analyse(loaded.sets, embedder=one_hot).distinctiveness().set_index("config")
    mine = dist.loc["fake-model__original (yours: mine)"]
    assert (mine.n_queries, mine.n_queries_no_population, mine.n_paths) == (1, 1, 2)
    assert (dist.drop(index=mine.name).n_queries_no_population == 0).all()


def test_a_user_run_scored_at_other_settings_is_named_as_recomputed_at_the_reports(tmp_path):
    """`create score --factuality-threshold 0.5 --discount paper` printed utility@0.9 7.6; the report
    recomputes from the judgments at its own 1.0 / reference (0.0 here, the last triple of each path
    judged hallucinated). Before: nothing said so; now the table shows what each run was scored with,
    and the message names the run whose settings differ."""
    from cresowlve_core.create import report as cr
    from cresowlve_core.llm.types import Completion

    class LastTripleHallucinated(FakeClient):
        async def complete(self, messages, params, *, prompt_version):
            if prompt_version.startswith("create_factuality"):
                n = len(json.loads(messages[-1]["content"].rsplit("Path: ", 1)[1]))
                return Completion(text=json.dumps({"judgments": ["not hallucinated"] * (n - 1) + ["hallucinated"]}))
            return await super().complete(messages, params, prompt_version=prompt_version)

    client = LastTripleHallucinated()
    cg.generate(None, EP, tmp_path / "mine", limit=2, client=client, progress=False)
    s = cs.score(tmp_path / "mine", EP, client=client, embedder=one_hot, progress=False, factuality_threshold=0.5,
                 discount="paper")
    assert s.mean_utility["0.9"] == pytest.approx(7.6)
    loaded = cr.load_sets(None, [str(tmp_path / "mine")], n_queries=1)
    assert loaded.user_table is not None
    assert loaded.user_table.iloc[0]["scored_with"] == "factuality_threshold 0.5, discount paper"
    assert loaded.message.endswith(
        "**Recomputed at this report's settings (factuality_threshold 1, discount reference):** `fake-model (yours: "
        "mine)` (factuality_threshold 0.5, discount paper) was scored with other settings, so the utilities here "
        "differ from those `cresowlve create score` printed.")
    mine = cr.analyse(loaded.sets, embedder=one_hot).leaderboard(n_boot=10).set_index("origin").loc["yours"]
    assert mine["utility@0.9"] == 0.0
    same = cr.load_sets(None, [str(tmp_path / "mine")], n_queries=1, factuality_threshold=0.5, discount="paper")
    assert "Recomputed" not in same.message


@pytest.mark.embeddings
def test_local_section_generates_and_self_judges_through_the_stages(tmp_path, tmp_cache):
    from create_fakes import server_reply
    from fakeserver import FakeServer

    from cresowlve_core.create import report as cr

    with FakeServer(answers=server_reply) as srv:
        local = cr.local_section(srv.base_url, "gemma3-270m", n_queries=2, run_dir=str(tmp_path / "local"),
                                 max_tokens=64)
        assert srv.total == 2 + 8
        assert srv.requests[0].body.get("max_tokens") == 64 or srv.requests[0].body.get("max_completion_tokens") == 64
    assert local.embedded and local.record["status"] == "ran" and local.record["n_valid"] == 4
    # a chat endpoint (the fake is no base model): the paper's prompts, every triple's judgment read
    assert local.record["prompts"] == {"generate": ["create_generate@1"],
                                       "judges": ["create_specificity@1", "create_factuality@1"]}
    assert (local.record["n_queries_with_paths"], local.record["n_triples_judged"],
            local.record["n_specificity_scored"], local.record["n_factuality_scored"]) == (2, 10, 10, 10)
    assert local.table is not None and list(local.table.query_id) == [q.id for q in Q]
    assert (tmp_path / "local" / "score" / "summary.json").is_file()
    # what `cresowlve report 07_create` exits with: generation and judging, as `create generate` and `score`
    assert local.stages == [{"unit": "calls", "n_calls": 2, "n_ok": 2, "n_error": 0, "n_missing": 0},
                            {"unit": "paths to judge", "n_to_judge": 4, "n_judged": 4, "n_judge_errors": 0, "n_not_judged": 0}]
    skipped = cr.local_section(None)
    assert skipped.record["status"] == "skipped" and not skipped.embedded and skipped.stages == []


@pytest.mark.embeddings  # `score` embeds with the bundled model
def test_local_section_scores_under_the_reports_settings(tmp_path, tmp_cache, monkeypatch):
    """The local model's utilities sit in one table beside the reference configurations': both under
    the report's discount, patience and factuality threshold (the local ones were computed under
    the released code's discount and threshold 1.0 whatever the report's parameters said)."""
    from create_fakes import server_reply
    from fakeserver import FakeServer

    from cresowlve_core.create import report as cr
    from cresowlve_core.create.scored import load_recorded

    monkeypatch.setattr(cr, "default_embedder", one_hot)
    reference = cr.analyse(cr.first_queries(load_recorded(), 2), embedder=one_hot, discount="paper")
    with FakeServer(answers=server_reply) as srv:
        local = cr.local_section(srv.base_url, "fake-model", n_queries=2, run_dir=str(tmp_path / "local"),
                                 reference=reference, patience=0.5, factuality_threshold=0.5)
    assert (local.record["discount"], local.record["factuality_threshold"]) == ("paper", 0.5)
    # two valid paths of strength 4 per query at distance 1: 4 + 4 x 0.5 under the paper's discount
    assert local.table is not None and list(local.table["utility@0.5"]) == [6.0, 6.0]
    assert local.record["mean_utility@0.5"] == 6.0
    ref = reference.per_query((0.5,), 0.5).set_index("query_id")
    for config in ref.config.unique():
        shown = local.table.set_index("query_id")[f"ref:{config}"]
        assert shown.dropna().to_dict() == ref[ref.config == config]["utility@0.5"].to_dict()
    with pytest.raises(ValueError, match="differs from the reference's 'paper'"):
        cr.local_section("http://127.0.0.1:9/v1", "fake-model", reference=reference, discount="reference")


def test_two_runs_with_one_directory_name_stay_two_configurations(tmp_path):
    """`seed1/run` (2 queries) and `seed2/run` (1 query) of one model were both `(yours: run)`: one
    configuration of 3 "queries" over 2 distinct ones, one query's two sets sharing one key. Each
    is named with the folder that tells it apart, and a directory matched twice is loaded once."""
    from cresowlve_core.create import report as cr

    for folder, limit in (("seed1", 2), ("seed2", 1)):
        client = FakeClient()
        cg.generate(None, EP, tmp_path / folder / "run", limit=limit, client=client, progress=False)
        cs.score(tmp_path / folder / "run", EP, client=client, embedder=one_hot, progress=False)
    loaded = cr.load_sets(None, [str(tmp_path / "*" / "run"), str(tmp_path / "seed1" / "run")], n_queries=2)
    assert loaded.user_table is not None
    assert dict(zip(loaded.user_table.config, loaded.user_table.n_queries, strict=True)) == {
        "fake-model__original (yours: seed1/run)": 2, "fake-model__original (yours: seed2/run)": 1}
    board = cr.analyse(loaded.sets, embedder=one_hot).leaderboard(n_boot=50)
    assert sorted(board[board.origin == "yours"].n_queries) == [1, 2]
    assert cs.distinct_names([tmp_path / "seed1" / "run", tmp_path / "other"]) == {
        tmp_path / "seed1" / "run": "run", tmp_path / "other": "other"}


def test_a_query_whose_generation_was_refused_is_named_beside_the_mean_it_counts_0_in(tmp_path):
    """A refused generation is final: the query has no path and a utility of 0, kept in the mean.
    The score line said "utility@0.9 4.000" and the table of your runs showed nothing of it; both
    now name it."""
    from outcome_double import OutcomeModel, refused

    from cresowlve_core.create import report as cr

    def reply(prompt: str):
        if "Path: " in prompt:
            return judge_reply(prompt)
        return refused() if Q[0].query in prompt else answer_for(prompt)

    cg.generate(None, EP, tmp_path / "mine", limit=2, client=OutcomeModel(reply), progress=False)
    s = cs.score(tmp_path / "mine", EP, client=OutcomeModel(reply), embedder=one_hot, progress=False)
    assert ("utility@0.9 4.000 (1 query with no path, the generation refused or filtered: each a utility of 0);"
            in score_line(s))
    assert (s.mean_utility["0.9"], s.n_unfinished_queries, s.n_withheld_queries) == (4.0, 0, 1)  # (0 + 8) / 2
    table = cr.load_sets(None, [str(tmp_path / "mine")], n_queries=1).user_table
    assert table is not None and (table.iloc[0]["refused"], table.iloc[0]["filtered"]) == (1, 0)


def test_a_query_whose_generation_did_not_parse_is_counted_in_the_table_of_your_runs(tmp_path):
    """An answer that does not parse leaves the query no path: a utility of 0, ranked. The table
    of your runs counted refused and filtered queries but showed nothing for it (`paths 0`,
    `incomplete 0`, `refused 0`, `filtered 0` beside a run at 0.00); it is now `unparsed`."""
    from outcome_double import OutcomeModel

    from cresowlve_core.create import report as cr

    def reply(prompt: str):
        if "Path: " in prompt:
            return judge_reply(prompt)
        return "<answer>no paths, sorry</answer>" if Q[0].query in prompt else answer_for(prompt)

    cg.generate(None, EP, tmp_path / "mine", limit=2, client=OutcomeModel(reply), progress=False)
    cs.score(tmp_path / "mine", EP, client=OutcomeModel(reply), embedder=one_hot, progress=False)
    table = cr.load_sets(None, [str(tmp_path / "mine")], n_queries=1).user_table
    assert table is not None
    assert table.iloc[0][["n_queries", "incomplete", "refused", "filtered", "unparsed"]].tolist() == [2, 0, 0, 0, 1]


def test_the_table_of_your_runs_shows_how_many_triples_each_judge_scored(tmp_path):
    """A specificity judge that answers ratings ("4/5") scores no triple: `create score` exits 1
    ("no specificity judgment parsed ... every path's strength is 0"), but 07_create ranked the
    run at 0.00 with nothing in the table of your runs about its judge. The table now shows the
    judges' coverage: triples of the judged paths, and how many each judge scored."""
    from outcome_double import OutcomeModel

    from cresowlve_core.create import report as cr

    def reply(prompt: str):
        if "Path: " in prompt and "Class A" in prompt:
            return json.dumps([{"explanation": "e", "judgment": "4/5"}] * 5)
        return judge_reply(prompt) if "Path: " in prompt else answer_for(prompt)

    cg.generate(None, EP, tmp_path / "mine", limit=2, client=OutcomeModel(reply), progress=False)
    s = cs.score(tmp_path / "mine", EP, client=OutcomeModel(reply), embedder=one_hot, progress=False)
    assert (s.n_triples, s.n_specificity_scored, s.n_factuality_scored) == (10, 0, 10)
    table = cr.load_sets(None, [str(tmp_path / "mine")], n_queries=1).user_table
    assert table is not None
    assert table.iloc[0][["n_triples", "n_specificity_scored", "n_factuality_scored"]].tolist() == [10, 0, 10]


@pytest.mark.embeddings  # `score` embeds with the bundled model
def test_local_section_leaves_a_failed_query_out_of_its_mean_not_at_zero(tmp_path, tmp_cache, monkeypatch):
    """The local section's mean utility averaged a query whose generation call failed as a 0 (4.00
    where `create score` says 8.0 over 1 of 2 queries); it is left out and said so."""
    from create_fakes import server_reply
    from fakeserver import FakeServer

    from cresowlve_core.create import report as cr

    def fault(req):  # the first query's generation fails on every attempt
        return "500" if Q[0].query in req.prompt and "Path: " not in req.prompt else None

    monkeypatch.setattr(cr, "default_embedder", one_hot)
    with FakeServer(answers=server_reply, faults=fault) as srv:
        local = cr.local_section(srv.base_url, "fake-model", n_queries=2, run_dir=str(tmp_path / "local"))
    assert local.record["mean_utility@0.9"] == 8.0 and local.record["n_unfinished_queries"] == 1
    assert "mean utility at p = 0.9: 8.00 over 1 of 2 queries (1 unfinished" in local.message
    assert local.table is not None
    row = local.table.set_index("query_id").loc[Q[0].id]
    assert math.isnan(row["utility@0.9"]) and row["flags"] == "call_failed"


def test_create_score_exits_1_when_its_mean_leaves_out_a_query_whose_generation_failed(tmp_path, capsys):
    """Every path judged, but one query's generation call failed: the mean utility is over 1 of 2
    queries. Before: exit 0 with that mean; now exit 1, the last line says what is left and how to
    finish it. Once the generation is finished, scoring exits 0."""
    from cresowlve_core.cli.create import _create_finish

    client = FakeClient(fail_first={Q[0].id})
    cg.generate(None, EP, tmp_path / "mine", limit=2, client=client, progress=False)
    s = cs.score(tmp_path / "mine", EP, client=client, embedder=one_hot, progress=False)
    assert (s.n_judge_errors, s.n_not_judged, s.n_unfinished_queries) == (0, 0, 1)
    assert _create_finish(s, "paths to judge") == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == (f"incomplete: 1 of 2 queries have no utility, their generation has a failed or missing call "
                    f"(flags in scores.json); run `cresowlve create generate` on {tmp_path / 'mine'} again, then "
                    "`cresowlve create score`")
    cg.generate(None, EP, tmp_path / "mine", limit=2, client=client, progress=False)
    s = cs.score(tmp_path / "mine", EP, client=client, embedder=one_hot, progress=False)
    assert s.n_unfinished_queries == 0 and _create_finish(s, "paths to judge") == 0
    assert capsys.readouterr().err == ""


def test_a_resample_set_missing_samples_after_a_stop_is_unfinished_not_scored_as_the_whole_set(tmp_path):
    """A run stopped (max_cost) after 2 of a query's 3 samples: that set is not the configuration's
    answer yet. Before: no flag, utility@0.9 14.84 from 2 samples counted as the query's resample
    utility; now it is flagged ``call_not_run`` and left out until the run is finished."""
    from cresowlve_core.llm.types import BudgetExceeded

    class StopsAfterTwo(FakeClient):
        generated = 0

        async def complete(self, messages, params, *, prompt_version):
            if prompt_version.startswith("create_generate"):
                self.generated += 1
                if self.generated > 2:
                    raise BudgetExceeded("max_cost reached")
            return await super().complete(messages, params, prompt_version=prompt_version)

    options = cg.GENERATE_OPTIONS.model_copy(update={"concurrency": 1})
    g = cg.generate(None, EP, tmp_path, variation="resample", n_samples=3, limit=1, client=StopsAfterTwo(),
                    options=options, progress=False)
    assert g.stopped and (g.n_ok, g.n_missing) == (2, 1)
    (gen,) = cg.load_generations(tmp_path)
    assert gen.n_calls_ok == 2 and "call_not_run" in gen.flags
    s = cs.score(tmp_path, EP, client=FakeClient(), embedder=one_hot, progress=False)
    assert s.n_unfinished_queries == 1 and s.mean_utility["0.9"] is None
    (row,) = json.loads((tmp_path / "score" / "scores.json").read_text())
    assert row["utility"] == {"0.7": None, "0.9": None}
    cg.generate(None, EP, tmp_path, variation="resample", n_samples=3, limit=1, client=FakeClient(), options=options,
                progress=False)  # the third sample
    (gen,) = cg.load_generations(tmp_path)
    assert gen.n_calls_ok == 3 and "call_not_run" not in gen.flags
    assert cs.score(tmp_path, EP, client=FakeClient(), embedder=one_hot, progress=False).n_unfinished_queries == 0


def test_a_query_whose_generation_failed_is_left_out_of_the_leaderboard_not_ranked_at_zero(tmp_path):
    """A failed call leaves the query with no paths: ranked, it would be a utility of 0. It is left
    out of the leaderboard, and the message and the runs table say so."""
    from cresowlve_core.create import report as cr

    client = FakeClient(fail_first={Q[0].id})
    cg.generate(None, EP, tmp_path / "mine", limit=2, client=client, progress=False)
    s = cs.score(tmp_path / "mine", EP, client=client, embedder=one_hot, progress=False)
    assert s.n_unfinished_queries == 1 and s.mean_utility["0.9"] == pytest.approx(8.0)  # Q[1] alone, not (8 + 0) / 2
    assert "over 1 of 2 queries (1 unfinished, left out)" in score_line(s)
    # scores.json: the failed query's utility is null beside its flag, not 0.0
    rows = {r["query_id"]: r for r in json.loads((tmp_path / "mine" / "score" / "scores.json").read_text())}
    assert rows[Q[0].id]["utility"] == {"0.7": None, "0.9": None} and rows[Q[0].id]["flags"] == ["call_failed"]
    assert rows[Q[1].id]["utility"] == {"0.7": 8.0, "0.9": 8.0}
    loaded = cr.load_sets(None, [str(tmp_path / "mine")])
    mine = [s for s in loaded.sets if s.origin == "yours"]
    assert [s.query_id for s in mine] == [Q[1].id]  # Q[0]'s failed call: left out, not a zero
    assert "Left out: 1 (configuration, query) set of your runs" in loaded.message
    assert loaded.user_table is not None and loaded.user_table.iloc[0]["incomplete"] == 1
    board = cr.analyse(loaded.sets, embedder=one_hot).leaderboard(n_boot=50)
    assert board[board.origin == "yours"].iloc[0].n_queries == 1


def test_a_generation_still_being_written_is_refused_and_cannot_resume_while_it_is_scored(tmp_path):
    """Before: ``create score`` read a generation that ``create generate`` was still writing, twice (its
    judge units at the start, its paths for the summary at the end), and its summary mixed them:
    "2 of 2 paths judged (4 valid, 2 factual of 6)", n_to_judge 2 beside n_valid 4."""
    client = FakeClient()
    cg.generate(None, EP, tmp_path, limit=2, client=client, progress=False)
    n_gen = len(client.calls)
    with RunDir(tmp_path).lock():  # a `create generate` still writing the run directory
        with pytest.raises(RunDirError, match="in use by another process"):
            cs.score(tmp_path, EP, client=client, embedder=one_hot, progress=False)
    assert len(client.calls) == n_gen and not (tmp_path / "score").exists()

    refused: list[str] = []

    class GenerateMeanwhile(FakeClient):
        async def complete(self, messages, params, *, prompt_version):
            if not refused:  # a `create generate` started on the run while it is being judged
                try:
                    with RunDir(tmp_path).lock():
                        refused.append("not refused")
                except RunDirError as exc:
                    refused.append(str(exc))
            return await super().complete(messages, params, prompt_version=prompt_version)

    with RunDir(tmp_path).reading():  # another judge reading the same generation: readers share it
        s = cs.score(tmp_path, EP, client=GenerateMeanwhile(), embedder=one_hot, progress=False)
    assert "in use by another process" in refused[0]
    assert (s.n_to_judge, s.n_judged, s.n_valid) == (4, 4, 4)
    with RunDir(tmp_path).lock():  # released once scored
        pass
