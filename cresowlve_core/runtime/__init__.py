"""The stage runtime: the plumbing every model-calling stage shares.

- :func:`run_coro` runs a coroutine from a script, the CLI or a notebook cell;
- :class:`ClientOptions` (one documented default per setting) and :func:`open_client` build the
  client; :func:`endpoint_or_embedded` falls back to the embedded model, and :func:`planned_endpoint`
  names that endpoint without starting it;
- :data:`STOP_ERRORS` are the errors that stop a whole run;
- :class:`Manifest` and :func:`check_resumable` say what a run directory holds and who may resume it
  (:func:`refuse_changed`: before anything starts);
  :func:`record_adaptations` adds the fields a provider refused and the client adapted (``adapted``);
- :class:`RunDir` is the run directory; :func:`map_with_resume` runs a call over many units;
  :func:`pipeline_summary` sums the steps of a multi-step pipeline;
- :mod:`~cresowlve_core.runtime.stop`: the first Ctrl-C or SIGTERM stops the current step and skips the rest.

See ``docs/adding-a-stage.md``.
"""

from cresowlve_core.runtime.aio import run_coro
from cresowlve_core.runtime.errors import STOP_ERRORS, StopWithRecord, stop_reason
from cresowlve_core.runtime.manifest import (
    Manifest,
    ResumeError,
    check_resumable,
    new_manifest,
    record_adaptations,
)
from cresowlve_core.runtime.mapping import INTERRUPTED, MapResult, is_ok, map_with_resume, pipeline_summary
from cresowlve_core.runtime.options import (
    ClientOptions,
    ModelRole,
    UnservedModel,
    check_served,
    client_endpoint,
    endpoint_or_embedded,
    open_client,
    planned_endpoint,
)
from cresowlve_core.runtime.provenance import git_sha, now_iso, package_versions
from cresowlve_core.runtime.rundir import RESPONSES, SUMMARY, RunDir, RunDirError, refuse_changed

__all__ = [
    "INTERRUPTED", "RESPONSES", "STOP_ERRORS", "SUMMARY", "ClientOptions", "MapResult", "Manifest", "ModelRole", "ResumeError",
    "RunDir", "RunDirError", "StopWithRecord", "UnservedModel", "check_resumable", "check_served", "client_endpoint", "endpoint_or_embedded", "git_sha",
    "is_ok", "map_with_resume", "new_manifest", "now_iso", "open_client", "package_versions", "pipeline_summary", "planned_endpoint", "record_adaptations", "refuse_changed",
    "run_coro", "stop_reason",
]
