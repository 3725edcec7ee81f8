"""One manifest for every run directory, and the one rule for resuming it.

A run directory can be resumed only by the same configuration (:func:`resume_identity`): the same
stage, model, base URL, provider, API, language, item set, prompt versions, the settings that shape
an answer (temperature, top_p, max tokens, seed, effort, extra body), the judge's same settings and
the stage-specific ``identity``. A loopback server on another port (the embedded model, a local
server restarted) is the same base URL, recorded in ``base_url_history``. An items file whose SHA-256
the manifest records (``items_sha256``) is not identified by its path: the stage checks the text of
each item it answered (an evaluation's records carry ``item_sha256``), so a copy at another path
resumes, its paths recorded in ``items_history``. Settings that do not change
an answer (concurrency, limits, timeouts, the cache) may change. A field an old manifest never
recorded is not compared, so runs written before it still resume.

Every run directory records its layout in ``format_version`` (the manifest's and summary.json's;
the manifest's covers the record files it describes, responses.jsonl among them). An older run
directory is read through one function, :func:`upgrade_manifest`; a newer one is refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cresowlve_core.failures import UsageError
from cresowlve_core.paths import file_sha256, shipped_data
from cresowlve_core.runtime.aio import event_loop_name
from cresowlve_core.runtime.provenance import git_sha, now_iso, package_versions
from cresowlve_core.secrets import strip_url_credentials
from cresowlve_core.untrusted import one_line

#: The manifest fields that must match for a run directory to be resumed (with the answer-shaping
#: client options and the judge's, :func:`resume_identity`).
RESUME_FIELDS: tuple[str, ...] = ("kind", "model", "base_url", "provider", "api", "lang", "items", "effort",
                                  "prompts", "temperature", "max_tokens", "seed", "identity")
#: The client options (``ClientOptions``) that change an answer.
ANSWER_OPTIONS: tuple[str, ...] = ("temperature", "max_tokens", "seed", "extra_body", "provider")
#: The judge's settings (``Manifest.judge``) that change a verdict.
JUDGE_FIELDS: tuple[str, ...] = ("model", "base_url", "provider", "api", "prompt", "protocol", "effort", "seed",
                                 "temperature", "max_tokens", "repeat", "extra_body", "top_p")
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
#: resume fields that manifests did not always record: compared only when the old manifest has them
_ADDED_LATER = frozenset({"provider", "api"})

#: The layout of a run directory's files: 2 since ``format_version`` is recorded; 1 (no field) before.
#: Layout 1 had manifests without ``kind`` (evaluation), with ``prompt: {name, version}`` instead of
#: ``prompts``, CREATE generation manifests of kind ``create`` with their settings at the top level,
#: and evaluation records with top-level ``em_strict`` / ``em_lenient`` booleans and no ``scores``
#: (read as scores by :func:`cresowlve_core.analysis.loading.load_run`).
FORMAT_VERSION = 2


class ResumeError(UsageError, ValueError):
    """The run directory holds a run of another configuration."""


def newer_layout(data: dict[str, Any]) -> str | None:
    """Why a manifest or summary.json (``data``) is of a layout this version does not read (``format_version``
    above :data:`FORMAT_VERSION`, or not a version: a newer cresowlve's), else None."""
    version = data.get("format_version", 1)
    if isinstance(version, int) and not isinstance(version, bool) and version <= FORMAT_VERSION:
        return None
    return (f"format_version {one_line(json.dumps(version, ensure_ascii=False), 40)} is newer than this cresowlve "
            f"reads ({FORMAT_VERSION}); upgrade cresowlve to read it")


def upgrade_manifest(data: dict[str, Any]) -> dict[str, Any]:
    """The manifest of a run directory of an older layout (``format_version`` below
    :data:`FORMAT_VERSION`, or none) in this layout; a current one unchanged. Refuses (``ValueError``,
    which :meth:`~cresowlve_core.runtime.RunDir.read_manifest` reports as an unusable run directory)
    a layout newer than this code reads."""
    if (newer := newer_layout(data)) is not None:
        raise ValueError(newer)
    data = dict(data)
    version = data.get("format_version", 1)
    if version < 2:
        data.setdefault("kind", "eval")
        old = data.get("prompt")
        if isinstance(old, dict) and "name" in old and not data.get("prompts"):
            data["prompts"] = [f"{old['name']}@{old.get('version')}"]
        if data["kind"] == "create":
            data = _create_generation_of_layout_1(data)
    data["format_version"] = FORMAT_VERSION
    return data


def _create_generation_of_layout_1(data: dict[str, Any]) -> dict[str, Any]:
    """CREATE's generation manifest before the runtime (kind ``create``, settings at the top level) as
    the runtime's (kind ``create_generate``, settings in ``identity``, ``items`` ``shipped`` or the path)."""
    qp = data.get("queries_path")
    shipped = not qp or Path(str(qp)) in (Path("data/create/queries.jsonl"), shipped_data("create", "queries.jsonl"))
    identity = {"variation": data.get("variation", "original"), "n_samples": data.get("n_samples", 1),
                "n_rounds": data.get("n_rounds", 1), "seed": data.get("seed", 0),
                "temperature": data.get("temperature"), "max_tokens": data.get("max_tokens")}
    n_items = data.get("n_items") if data.get("n_items") is not None else data.get("n_queries")
    return {**data, "kind": "create_generate", "identity": identity, "items": "shipped" if shipped else str(qp),
            "n_items": n_items}


class Manifest(BaseModel):
    """``manifest.json`` of a run directory. Stage-specific extras are kept (``extra="allow"``)."""

    model_config = ConfigDict(extra="allow")

    kind: str = Field(description="the stage: eval, create_generate, create_score, construction, ...")
    format_version: int = Field(FORMAT_VERSION, description="the layout of the run directory's files")
    run_id: str = ""
    model: str | None = None
    base_url: str | None = None
    base_url_history: list[str] = Field(default_factory=list)
    provider: str | None = Field(None, description="the provider profile requests were written for (llm/profiles.py)")
    api_key_env: str | None = Field(None, description="the NAME of the key variable, never its value")
    lang: str | None = None
    items: str | None = Field(None, description="the item set: demo, hub:en, a path, ...")
    n_items: int | None = Field(None, description="units planned")
    limit: int | None = None
    effort: str | None = None
    thinking: bool = False
    seed: int = 0
    temperature: float | None = None
    max_tokens: int | None = None
    prompts: list[str] = Field(default_factory=list, description="name@version of every prompt used")
    identity: dict[str, Any] = Field(default_factory=dict, description="further settings that must match on resume")
    options: dict[str, Any] = Field(default_factory=dict, description="client options (ClientOptions)")
    sent: dict[str, Any] = Field(default_factory=dict, description="request fields beyond messages, as sent")
    adapted: list[dict[str, Any]] = Field(
        default_factory=list,
        description="request fields the provider refused by name and the client then dropped or renamed in every "
                    "call ({field, action, to, reason}; the judge's in judge.adapted); not part of the resume identity")
    judge: dict[str, Any] | None = None
    git_sha: str | None = None
    packages: dict[str, str] = Field(default_factory=dict)
    event_loop: str | None = Field(None, description="the event loop the run started on (runtime.aio.event_loop_name)")
    started_at: str | None = None
    resumed_at: str | None = None
    finished_at: str | None = None
    stopped: str | None = None
    synthetic: bool = False
    config: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _upgrade(cls, data: Any) -> Any:
        """An older layout through :func:`upgrade_manifest`; a base URL's credentials never kept."""
        if isinstance(data, dict):
            data = upgrade_manifest(data)
            if data.get("base_url"):
                data["base_url"] = strip_url_credentials(str(data["base_url"]))
        return data

    @model_validator(mode="after")
    def _sorted(self) -> Manifest:
        self.prompts = sorted(set(self.prompts))
        return self


def new_manifest(kind: str, **fields: Any) -> Manifest:
    """A manifest with provenance (git SHA, package versions, the event loop, start time) filled in."""
    if fields.get("base_url") and not fields.get("provider"):
        from cresowlve_core.llm.profiles import detect

        fields["provider"] = detect(str(fields["base_url"])).name
    fields.setdefault("event_loop", event_loop_name())
    return Manifest(kind=kind, format_version=FORMAT_VERSION, git_sha=git_sha(), packages=package_versions(),
                    started_at=now_iso(), **fields)


def same_server(url: str | None) -> str | None:
    """``url`` as the resume rule compares it: a loopback host's port is dropped (a local server
    gets a new port each time it starts)."""
    if not url:
        return url
    parts = urlsplit(url)
    if parts.hostname in _LOOPBACK:
        return f"{parts.scheme}://loopback{parts.path.rstrip('/')}"
    return url.rstrip("/")


def _top_p(sent: dict[str, Any], extra_body: Any) -> Any:
    return sent.get("top_p", extra_body.get("top_p") if isinstance(extra_body, dict) else None)


def resume_identity(m: Manifest, *, recorded_only: bool = False) -> dict[str, Any]:
    """Everything that must match for ``m``'s run directory to be resumed, by field name
    (``options.*`` for the answer-shaping client options; ``judge``: the judge's settings or None).
    ``recorded_only``: of the fields added later (provider, API, what was sent, the judge), only
    those ``m``'s file holds with a value (an old manifest written before them is not refused over them)."""
    recorded = m.model_fields_set | set(m.model_extra or {}) if recorded_only else None
    out: dict[str, Any] = {}
    for f in RESUME_FIELDS:
        if recorded is None or f not in _ADDED_LATER or (f in recorded and getattr(m, f, None) is not None):
            value = getattr(m, f, None)
            out[f] = same_server(value) if f == "base_url" else value
    if recorded is None or "sent" in recorded:
        out["top_p"] = _top_p(m.sent, m.options.get("extra_body"))
    out.update({f"options.{f}": m.options[f] for f in ANSWER_OPTIONS if f in m.options})
    if recorded is None or "judge" in recorded:
        out["judge"] = _judge_identity(m) if m.judge else None
    return out


def _judge_identity(m: Manifest) -> dict[str, Any]:
    judge = dict(m.judge or {})
    # none recorded (a version before --judge-extra-body, 2026-12-01): nothing was merged, as {} says
    judge.setdefault("extra_body", m.config.get("judge_extra_body") or {})
    if isinstance(judge.get("sent"), dict):
        judge.setdefault("top_p", _top_p(judge["sent"], judge.get("extra_body")))
    return {f: same_server(judge[f]) if f == "base_url" else judge[f] for f in JUDGE_FIELDS if f in judge}


def items_file_sha256(items: str | None) -> str | None:
    """The SHA-256 of the items file ``items`` names (None for a named set, demo or hub, or no file)."""
    if not items or items == "demo" or items == "hub" or items.startswith("hub:") or not Path(items).is_file():
        return None
    return file_sha256(items)


def same_items(old: Manifest, new: Manifest) -> bool:
    """Whether ``new`` reads ``old``'s item set: an items file at any path where both manifests record its
    SHA-256 (the stage that records it checks each answered item's text: an evaluation's ``item_sha256``),
    else the same ``items``."""
    both_digested = all(isinstance(getattr(m, "items_sha256", None), str) for m in (old, new))
    return both_digested or old.items == new.items


def identity_changes(old: Manifest, new: Manifest) -> list[str]:
    """``field: old → new`` for every resume field ``old`` recorded that ``new`` changes."""
    was, now = resume_identity(old, recorded_only=True), resume_identity(new)
    was.pop("items", None)  # a path, or the content where both manifests record its SHA-256 (same_items)
    if new.config.get("retry_truncated"):  # re-asking cut-off answers with a larger budget is the point
        was.pop("max_tokens", None)
        was.pop("options.max_tokens", None)
    out = [] if same_items(old, new) else [f"items: {old.items!r} → {new.items!r}"]
    for k, v in was.items():
        n = now.get(k)
        if k == "judge" and isinstance(v, dict) and isinstance(n, dict):
            out += [f"judge.{f}: {v[f]!r} → {n.get(f)!r}" for f in v if v[f] != n.get(f)]
        elif v != n:
            out.append(f"{k}: {v!r} → {n!r}")
    if (narrowed := narrowed_by_limit(old, new)) is not None:
        out.append(narrowed)
    return out


def narrowed_by_limit(old: Manifest, new: Manifest) -> str | None:
    """``limit: old → new (...)`` when ``new`` plans fewer of the same units than ``old`` did because
    of its ``limit``: the answers to the units left out would drop out of the run's manifest and
    summary while its records keep them. A larger limit (or none) continues the run."""
    if new.limit is None or not same_items(old, new) or old.n_items is None or new.n_items is None \
            or new.n_items >= old.n_items:
        return None
    # a limit of the old one, or of as many as the old units, plans them again (a limit may count fewer
    # than the units: items per set of a contamination configuration, each with two completions)
    enough = old.n_items if old.limit is None else min(old.limit, old.n_items)
    return (f"limit: {old.limit!r} → {new.limit!r} (plans {new.n_items} of the {old.n_items} units it planned, "
            f"leaving the others' answers out of its summary; a limit of {enough} or more continues it)")


def check_resumable(old: Manifest, new: Manifest) -> Manifest:
    """Raise :class:`ResumeError` (naming every field that differs, old → new) unless ``new`` may
    continue ``old``'s run; return ``new`` with the start time, the base-URL history and the resume
    time carried over."""
    diffs = identity_changes(old, new)
    if diffs:
        raise ResumeError(f"the run directory holds another configuration ({'; '.join(diffs)}); "
                          "use another run directory (resume only continues the same configuration)")
    history = old.base_url_history or ([old.base_url] if old.base_url else [])
    if new.base_url and (not history or history[-1] != new.base_url):
        history = [*history, new.base_url]
    # the items files every invocation read (a hub snapshot's revision and SHA-256 each): one that read
    # another snapshot adds its files, the earlier ones stay named
    read = getattr(new, "items_files", None) or []
    earlier = [f for f in getattr(old, "items_files", None) or [] if f not in read]
    files = {"items_files": [*earlier, *read]} if earlier else {}
    # the paths the run's items file was read from, once a resume reads it from another path (same_items)
    items_paths = list(getattr(old, "items_history", None) or [old.items])
    if new.items != items_paths[-1]:
        items_paths.append(new.items)
    if len(items_paths) > 1:
        files["items_history"] = items_paths
    new = new.model_copy(update={"started_at": old.started_at, "resumed_at": now_iso(),
                                 "base_url_history": history, **files})
    return record_adaptations(new, old.adapted, (old.judge or {}).get("adapted") or [])


def _merged(earlier: list[dict[str, Any]], later: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Adaptations of both lists, one per field (the earlier one kept)."""
    out = list(earlier)
    out += [a for a in later if all(a.get("field") != b.get("field") for b in out)]
    return out


def record_adaptations(manifest: Manifest, model: Any = (), judge: Any = ()) -> Manifest:
    """``manifest`` with the adaptations the clients made (``LLMClient.adaptations``, or a list of them)
    added to ``adapted`` and ``judge.adapted``; the earlier ones kept (a resumed run that sent nothing
    keeps what its first run learnt). A stage calls it on the manifest it finishes with."""
    def of(client: Any) -> list[dict[str, Any]]:
        return list(client if isinstance(client, (list, tuple)) else getattr(client, "adaptations", None) or [])

    update: dict[str, Any] = {"adapted": _merged(manifest.adapted, of(model))}
    if manifest.judge is not None and (of(judge) or manifest.judge.get("adapted")):
        update["judge"] = {**manifest.judge, "adapted": _merged(manifest.judge.get("adapted") or [], of(judge))}
    return manifest.model_copy(update=update)
