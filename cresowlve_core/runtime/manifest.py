"""One manifest for every run directory, and the one rule for resuming it.

A run directory can be resumed only by the same configuration: the same stage, model, language,
item set, effort, prompt versions and stage-specific ``identity`` settings. A new base URL is
allowed (the same model served from another host or port) and is recorded in ``base_url_history``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cresowlve_core.runtime.provenance import git_sha, now_iso, package_versions
from cresowlve_core.secrets import strip_url_credentials

#: The fields that must match for a run directory to be resumed.
RESUME_FIELDS: tuple[str, ...] = ("kind", "model", "lang", "items", "effort", "prompts", "identity")


class ResumeError(ValueError):
    """The run directory holds a run of another configuration."""


class Manifest(BaseModel):
    """``manifest.json`` of a run directory. Stage-specific extras are kept (``extra="allow"``)."""

    model_config = ConfigDict(extra="allow")

    kind: str = Field(description="the stage: eval, create_generate, create_score, construction, ...")
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
    judge: dict[str, Any] | None = None
    git_sha: str | None = None
    packages: dict[str, str] = Field(default_factory=dict)
    started_at: str | None = None
    resumed_at: str | None = None
    finished_at: str | None = None
    stopped: str | None = None
    synthetic: bool = False
    config: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _upgrade(cls, data: Any) -> Any:
        """Read manifests written before the runtime: ``prompt: {name, version}`` and CREATE's
        ``kind: create``."""
        if isinstance(data, dict):
            data = dict(data)
            data.setdefault("kind", "eval")  # evaluation manifests written before ``kind`` was required
            old = data.get("prompt")
            if isinstance(old, dict) and "name" in old and not data.get("prompts"):
                data["prompts"] = [f"{old['name']}@{old.get('version')}"]
            if data.get("base_url"):
                data["base_url"] = strip_url_credentials(str(data["base_url"]))
        return data

    @model_validator(mode="after")
    def _sorted(self) -> Manifest:
        self.prompts = sorted(set(self.prompts))
        return self


def new_manifest(kind: str, **fields: Any) -> Manifest:
    """A manifest with provenance (git SHA, package versions, start time) filled in."""
    if fields.get("base_url") and not fields.get("provider"):
        from cresowlve_core.llm.profiles import detect

        fields["provider"] = detect(str(fields["base_url"])).name
    return Manifest(kind=kind, git_sha=git_sha(), packages=package_versions(), started_at=now_iso(), **fields)


def check_resumable(old: Manifest, new: Manifest) -> Manifest:
    """Raise :class:`ResumeError` unless ``new`` may continue ``old``'s run; return ``new`` with
    the start time, the base-URL history and the resume time carried over."""
    diffs = [f for f in RESUME_FIELDS if getattr(old, f) != getattr(new, f)]
    if diffs:
        detail = "; ".join(f"{f}: {getattr(old, f)!r} -> {getattr(new, f)!r}" for f in diffs)
        raise ResumeError(f"the run directory holds another configuration ({detail}); "
                          "use another run directory (resume only continues the same configuration)")
    history = old.base_url_history or ([old.base_url] if old.base_url else [])
    if new.base_url and (not history or history[-1] != new.base_url):
        history = [*history, new.base_url]
    return new.model_copy(update={"started_at": old.started_at, "resumed_at": now_iso(),
                                  "base_url_history": history})
