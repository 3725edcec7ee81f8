"""The OpenAI Batch API: submit many requests at half price, collect them later, never lose paid work.

``submit_batch`` builds every line's body with the live client's own request builder (the
endpoint's wire format: ``max_completion_tokens`` and the effort for reasoning models, exactly as a
live call sends them), writes ``run_dir/batch_input.jsonl``, uploads it (``purpose="batch"``),
creates a batch on the requests' API path (``/v1/chat/completions`` or ``/v1/responses``) with a
24 h window and records it in ``run_dir/batch.json``. If ``batch.json`` already exists it returns
the recorded id instead of submitting again, so re-running never pays twice.

``collect_batch`` returns ``None`` while the batch runs (``validating``, ``in_progress``,
``finalizing``, ``cancelling``). Once it has ended (``completed``, ``expired``, ``cancelled``,
``failed``) it downloads the output *and* the error file (kept as ``batches/<id>.output.jsonl`` and
``batches/<id>.errors.jsonl``) and returns a :class:`BatchResult`:

* ``answers``: every finished answer, an expired or cancelled batch's partial output included;
* ``errors``: requests the provider answered with a per-request error (its own message), or whose
  line is not JSON (cut off: it ran, but cannot be read); ``failed``: those of them whose response the
  provider itself said failed (a Responses body with ``status: "failed"``: outcome ``failed``, as live);
* ``not_run``: requests never run (``batch_expired``, ``batch_cancelled``, absent from both files,
  or refused for a reason that stops a live run, such as an unsupported parameter);
* ``reason``: why nothing (more) can come from this batch: the provider's ``errors.data[].message``
  of a failed batch, or the message of a line that a live run would stop on;
* ``unusable``: requests answered with no text (also in ``errors``), which the provider billed all
  the same: their cost at the Batch API's price (``None`` if unknown), not in any answer's cost;
* ``unknown``: custom ids of lines for requests this batch was not sent (read from its input
  file): never taken as answers, errors or requests not run, and named in a WARNING.

The caller stores what it wants, then calls ``archive_batch``: ``batch.json`` and the input move to
``batches/<id>.json`` and ``batches/<id>.input.jsonl``, so the next submission sends only what is
still missing. An unreadable ``batch.json`` raises :class:`BatchStateError` (a configuration error)
naming the two ways forward. The openai SDK is imported only when a batch is submitted or collected.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cresowlve_core.failures import InputError
from cresowlve_core.jsonl import dumps_lines
from cresowlve_core.llm.pricing import PriceTable
from cresowlve_core.llm.types import Completion, Endpoint, GenParams, LLMConfigError, LLMFatalError
from cresowlve_core.llm.wire import AttemptFailed, get_wire
from cresowlve_core.outfiles import write_json
from cresowlve_core.text import hashed_name, slug

if TYPE_CHECKING:
    import openai

log = logging.getLogger(__name__)

BATCH_FILE = "batch.json"
INPUT_FILE = "batch_input.jsonl"
ARCHIVE_DIR = "batches"
RUNNING_STATES = frozenset({"validating", "in_progress", "finalizing", "cancelling"})
ENDED_STATES = frozenset({"completed", "expired", "cancelled", "failed"})
NOT_RUN_CODES = frozenset({"batch_expired", "batch_cancelled"})  # the request was never executed
_CUSTOM_ID = re.compile(r'"custom_id"\s*:\s*"((?:[^"\\]|\\.)*)"')  # the first one: the line's own

BatchRequest = tuple[str, list[dict[str, Any]], GenParams]


class BatchStateError(LLMConfigError):
    """``batch.json`` cannot be read: nothing is sent until the user chooses how to go on."""


@dataclass
class BatchResult:
    """What an ended batch produced (see the module docstring)."""

    batch_id: str
    status: str
    answers: dict[str, Completion] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    failed: set[str] = field(default_factory=set)
    not_run: list[str] = field(default_factory=list)
    reason: str | None = None
    n_submitted: int = 0
    unknown: list[str] = field(default_factory=list)
    unusable: dict[str, float | None] = field(default_factory=dict)


def _client(endpoint: Endpoint) -> openai.OpenAI:
    import openai

    return openai.OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key(), max_retries=3, timeout=120.0)


def _api_error(what: str, endpoint: Endpoint, exc: Exception) -> LLMFatalError:
    message = getattr(exc, "message", None) or str(exc)
    return LLMFatalError(f"{what} at {endpoint.describe()} failed: {type(exc).__name__}: {' '.join(message.split())[:400]}")


def batch_line(endpoint: Endpoint, custom_id: str, messages: list[dict[str, Any]], params: GenParams) -> dict[str, Any]:
    """One input line; the body is what the live client would send for the same call (the same
    wire and provider profile: ``LLMClient`` builds its requests with exactly this call)."""
    path, body = get_wire(endpoint.wire).build_request(endpoint.model, messages, params, endpoint.profile)
    return {"custom_id": custom_id, "method": "POST", "url": "/v1" + path, "body": body}


# --------------------------------------------------------------------------- state file


def _state_path(run_dir: Path) -> Path:
    return run_dir / BATCH_FILE


def read_state(run_dir: str | Path) -> dict[str, Any] | None:
    """The recorded batch, ``None`` if there is none, :class:`BatchStateError` if unreadable."""
    path = _state_path(Path(run_dir))
    if not path.exists():
        return None
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
        problem = None if isinstance(state, dict) and isinstance(state.get("batch_id"), str) and state["batch_id"] \
            else "it has no batch_id"
        if problem and isinstance(state, dict) and state.get("status") == "submitting":
            problem = ("a submission was interrupted before the provider's batch id was recorded; a batch may "
                       f"exist, its metadata says cresowlve_run={state.get('run')!r}")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        state, problem = None, f"{type(exc).__name__}: {exc}"
    if problem is None:
        return state  # type: ignore[no-any-return]
    raise BatchStateError(
        f"{path} is unreadable ({problem}); nothing was sent. It records the batch submitted from this run "
        f"directory. To collect that batch, write its id back: echo '{{\"batch_id\": \"batch_...\"}}' > {path} "
        "(your batches are listed at the provider, e.g. https://platform.openai.com/batches). To give it up "
        f"and submit the items without an answer as a new batch, move the file aside: mv {path} {path}.bad"
    )


def _write_state(run_dir: Path, state: dict[str, Any]) -> None:
    write_json(_state_path(run_dir), state)


def _archive_stem(batch_id: str) -> str:
    """The file name stem of a batch's files in ``batches/``: its id when that is a safe file name
    (``batch_abc123``), else the id's :func:`~cresowlve_core.text.slug`. The id comes from the provider or a
    hand-edited ``batch.json``; written as it is, ``../x`` or ``a/b`` put the files outside ``batches/``."""
    return slug(batch_id) if batch_id.strip(" .") else hashed_name("batch", batch_id)


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def archive_batch(run_dir: str | Path) -> Path | None:
    """Move ``batch.json`` (and the input it was made from) to ``batches/<id>.json``; the run
    directory is then free for the next submission. Returns the archived state file."""
    run_dir = Path(run_dir)
    state = read_state(run_dir)
    if state is None:
        return None
    archive = run_dir / ARCHIVE_DIR
    archive.mkdir(exist_ok=True)
    stem = _archive_stem(state["batch_id"])
    if (run_dir / INPUT_FILE).exists():
        (run_dir / INPUT_FILE).replace(archive / f"{stem}.input.jsonl")
    target = archive / f"{stem}.json"
    _state_path(run_dir).replace(target)
    return target


# --------------------------------------------------------------------------- submit


def submit_batch(endpoint: Endpoint, requests: list[BatchRequest], run_dir: str | Path) -> str:
    """Submit ``(custom_id, messages, params)`` requests; returns the batch id (see module doc)."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    state = read_state(run_dir)
    if state is not None:
        log.warning("batch %s already submitted from %s; not submitting again", state["batch_id"], run_dir)
        return str(state["batch_id"])
    ids = [cid for cid, _, _ in requests]
    if len(set(ids)) != len(ids):
        raise InputError("custom ids must be unique within a batch")
    if not requests:
        raise InputError("no requests to submit")
    lines = [batch_line(endpoint, cid, messages, params) for cid, messages, params in requests]
    urls = {line["url"] for line in lines}
    if len(urls) != 1:
        raise LLMConfigError(f"a batch goes to one API path; these requests use {sorted(urls)}")
    url = urls.pop()
    input_path = run_dir / INPUT_FILE
    input_path.write_text(dumps_lines(lines), encoding="utf-8")
    import openai

    run_tag = str(run_dir.resolve())[-500:]  # batch metadata values hold at most 512 characters
    client = _client(endpoint)
    try:
        with input_path.open("rb") as fh:
            uploaded = client.files.create(file=(INPUT_FILE, fh), purpose="batch")
        # recorded before the batch exists: a kill between the two steps leaves a state that is refused
        # (naming the batch's metadata), never a silent second submission
        _write_state(run_dir, {"batch_id": "", "status": "submitting", "input_file_id": uploaded.id, "run": run_tag})
        try:
            batch = client.batches.create(input_file_id=uploaded.id, endpoint=url, completion_window="24h",  # type: ignore[arg-type]
                                          metadata={"cresowlve_run": run_tag})
        except openai.APIError:
            _state_path(run_dir).unlink()  # refused: no batch exists
            raise
    except openai.APIError as exc:
        raise _api_error("batch submission", endpoint, exc) from None
    finally:
        client.close()
    _write_state(run_dir, {
        "batch_id": batch.id, "input_file_id": uploaded.id, "submitted_at": _now(), "n": len(requests),
        "model": endpoint.model, "base_url": endpoint.base_url, "url": url, "status": batch.status, "run": run_tag,
    })
    log.info("submitted batch %s (%d requests) to %s", batch.id, len(requests), endpoint.describe())
    return str(batch.id)


# --------------------------------------------------------------------------- collect


def _errors_reason(errors: Any) -> str | None:
    """The provider's own words for a failed batch: ``errors.data[].message`` (with the line)."""
    data = (errors or {}).get("data") if isinstance(errors, dict) else None
    parts = []
    for e in data or []:
        if isinstance(e, dict) and e.get("message"):
            where = f"line {e['line']}: " if e.get("line") is not None else ""
            code = f" [{e['code']}]" if e.get("code") else ""
            parts.append(f"{where}{' '.join(str(e['message']).split())}{code}")
    if not parts:
        return None
    more = f" (and {len(parts) - 3} more)" if len(parts) > 3 else ""
    return "; ".join(parts[:3]) + more


def _read_lines(content: bytes | None) -> list[tuple[dict[str, Any], bool]]:
    """The file's lines that name a ``custom_id``, each with whether it held bytes that are not
    UTF-8 (decoded as U+FFFD, as the live client decodes such a body, and flagged the same way)."""
    out = []
    for n, raw_bytes in enumerate((content or b"").split(b"\n"), 1):  # "\n" only
        try:
            raw, invalid_utf8 = raw_bytes.decode("utf-8"), False
        except UnicodeDecodeError:
            raw, invalid_utf8 = raw_bytes.decode("utf-8", "replace"), True
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except json.JSONDecodeError:
            cid = _CUSTOM_ID.search(raw)
            log.warning("batch file line %d is not JSON (%s); %s", n, raw[:80],
                        "skipped" if cid is None else "its request is recorded as errored")
            if cid is None:
                continue
            # the provider ran (and billed) this request, but its line cannot be read: an error, asked again
            line = {"custom_id": _json_string(cid[1]), "response": None,
                    "error": {"message": f"line {n} of the provider's file is not JSON (cut off?); the file is kept "
                                         "under batches/"}}
        if isinstance(line, dict) and line.get("custom_id") is not None:
            out.append((line, invalid_utf8))
        else:
            log.warning("batch file line %d names no custom_id; skipped (%s)", n, raw[:80])
    return out


def _json_string(escaped: str) -> str:
    """The string of a JSON string literal's inside (its escapes read), or the inside as it is."""
    try:
        return str(json.loads(f'"{escaped}"'))
    except json.JSONDecodeError:
        return escaped


def _submitted_ids(run_dir: Path) -> list[str]:
    path = run_dir / INPUT_FILE
    if not path.exists():
        return []
    return [str(line["custom_id"]) for line, _ in _read_lines(path.read_bytes())]


def _download(client: openai.OpenAI, file_id: str | None) -> bytes | None:
    return client.files.content(file_id).content if file_id else None


def collect_batch(
    endpoint: Endpoint, run_dir: str | Path, *, prices: PriceTable | None = None
) -> BatchResult | None:
    """The ended batch's results, or ``None`` while it is still running (see the module docstring)."""
    run_dir = Path(run_dir)
    state = read_state(run_dir)
    if state is None:
        raise LLMConfigError(f"no {BATCH_FILE} in {run_dir}: submit a batch first")
    import openai

    bid = state["batch_id"]
    client = _client(endpoint)
    try:
        try:
            batch = client.batches.retrieve(bid)
        except openai.NotFoundError as exc:
            raise LLMFatalError(
                f"batch {bid} (recorded in {_state_path(run_dir)}) is not known at {endpoint.describe()} "
                f"({exc.message}); collect it with the key and base URL it was submitted with, or move "
                f"{BATCH_FILE} aside to submit the items without an answer as a new batch") from None
        _refuse_another_runs_batch(client, batch, state, run_dir)
        counts = batch.request_counts.model_dump() if batch.request_counts is not None else None
        state.update(status=batch.status, checked_at=_now(), request_counts=counts)
        _write_state(run_dir, state)
        if batch.status not in ENDED_STATES:
            log.info("batch %s is %s (%s)", bid, batch.status, counts)
            return None
        try:
            output = _download(client, batch.output_file_id)
            errors = _download(client, batch.error_file_id)
        except openai.NotFoundError as exc:
            raise LLMFatalError(
                f"batch {bid} ended as {batch.status!r}, but {endpoint.describe()} no longer has its result files "
                f"({exc.message}; the provider deletes them some time after the batch ends). Nothing was "
                f"recorded from it: move {BATCH_FILE} aside to submit the items without an answer as a new batch") from None
    except openai.APIError as exc:
        raise _api_error(f"collecting batch {bid}", endpoint, exc) from None
    finally:
        client.close()

    archive = run_dir / ARCHIVE_DIR
    archive.mkdir(exist_ok=True)
    for content, suffix in ((output, "output"), (errors, "errors")):
        if content is not None:
            (archive / f"{_archive_stem(bid)}.{suffix}.jsonl").write_bytes(content)  # the provider's own record, kept
    batch_errors = batch.errors.model_dump() if batch.errors is not None else None
    result = _interpret(endpoint, state, _read_lines(output) + _read_lines(errors), prices or PriceTable.load())
    result.batch_id, result.status = bid, batch.status
    submitted = _submitted_ids(run_dir)
    result.n_submitted = len(submitted) or int(state.get("n") or 0)
    if submitted:
        _set_aside_unknown(result, set(submitted))
    seen = result.answers.keys() | result.errors.keys() | set(result.not_run)
    result.not_run += [cid for cid in submitted if cid not in seen]
    if batch.status == "failed":
        result.reason = _errors_reason(batch_errors) or result.reason or "the provider gave no reason"
    state.update(collected_at=_now(), n_answers=len(result.answers), n_errors=len(result.errors),
                 n_not_run=len(result.not_run), n_unknown=len(result.unknown), n_unusable=len(result.unusable),
                 unusable_cost=_known_sum(result.unusable.values()), reason=result.reason,
                 errors=batch_errors)
    _write_state(run_dir, state)
    return result


def _known_sum(costs: Iterable[float | None]) -> float:
    """The sum of the known costs."""
    return sum(c for c in costs if c is not None)


def _set_aside_unknown(result: BatchResult, submitted: set[str]) -> None:
    """Move the lines for requests this batch was not sent out of ``result``'s answers, errors and
    requests not run, into ``result.unknown``."""
    result.unknown = sorted({*result.answers, *result.errors, *result.not_run} - submitted)
    if not result.unknown:
        return
    for cid in result.unknown:
        result.answers.pop(cid, None)
        result.errors.pop(cid, None)
        result.failed.discard(cid)
        result.unusable.pop(cid, None)
    result.not_run = [cid for cid in result.not_run if cid in submitted]
    shown = ", ".join(repr(cid) for cid in result.unknown[:3]) + (", ..." if len(result.unknown) > 3 else "")
    log.warning("batch %s has %d line(s) for requests it was not sent (custom_id %s): not recorded",
                result.batch_id, len(result.unknown), shown)


def _refuse_another_runs_batch(client: openai.OpenAI, batch: Any, state: dict[str, Any], run_dir: Path) -> None:
    """Raise :class:`BatchStateError` when the batch named in ``batch.json`` (an id written back by
    hand) was made from other requests than this run directory's ``batch_input.jsonl``: its answers
    are another run's (another model, other items), not this run's."""
    import openai

    mine = run_dir / INPUT_FILE
    if not batch.input_file_id or batch.input_file_id == state.get("input_file_id") or not mine.exists():
        return  # the batch this run submitted, or nothing to compare with
    try:
        theirs = _download(client, batch.input_file_id)
    except openai.NotFoundError:
        log.warning("batch %s: its input file is gone at the provider, so it cannot be checked against %s",
                    batch.id, mine)
        return
    if [line for line, _ in _read_lines(theirs)] == [line for line, _ in _read_lines(mine.read_bytes())]:
        return
    origin = (batch.metadata or {}).get("cresowlve_run")
    raise BatchStateError(
        f"batch {batch.id} (written in {_state_path(run_dir)}) was not made from this run directory's {INPUT_FILE}"
        + (f" (it was submitted from {origin})" if origin else "")
        + "; nothing was recorded from it. Write back the id of the batch submitted from this run directory, "
        f"or move {BATCH_FILE} aside to submit the items without an answer as a new batch")


def _batch_cost(endpoint: Endpoint, completion: Completion, prices: PriceTable) -> float | None:
    """What the provider charged for ``completion``: its own figure, else its usage at the Batch API's
    price of the model asked for (or of the model that answered)."""
    if completion.cost is not None:
        return completion.cost
    cost = prices.cost(endpoint.model, completion.usage, batch=True)
    if cost is None and completion.model:
        cost = prices.cost(completion.model, completion.usage, batch=True)
    return cost


def _some(ids: list[str]) -> str:
    """The first three of ``ids``, and "..." if there are more."""
    return ", ".join(ids[:3]) + (", ..." if len(ids) > 3 else "")


def _interpret(endpoint: Endpoint, state: dict[str, Any], lines: list[tuple[dict[str, Any], bool]],
               prices: PriceTable) -> BatchResult:
    """Sort output and error lines into answers, per-request errors and requests never run, reading
    each response exactly as the live client reads an HTTP answer (the wire's ``interpret``)."""
    wire = get_wire(endpoint.wire)
    path = str(state.get("url") or "/v1/chat/completions").removeprefix("/v1")
    out = BatchResult(batch_id=str(state["batch_id"]), status="")
    fatal: list[str] = []
    repeated: list[str] = []  # lines for a request already answered by an earlier line
    for line, invalid_utf8 in lines:
        cid = str(line["custom_id"])
        if cid in out.answers:
            repeated.append(cid)
            continue
        resp, err = line.get("response"), line.get("error")
        if isinstance(resp, dict) and isinstance(resp.get("status_code"), int):
            body = resp.get("body")
            content = json.dumps(body).encode() if not isinstance(body, str) else body.encode()
            try:
                completion = wire.interpret(path, resp["status_code"], {}, content, endpoint.profile)
            except AttemptFailed as exc:
                if exc.failure.kind == "fatal":  # a live run stops on this: the request is not run
                    fatal.append(exc.failure.message)
                    out.not_run.append(cid)
                else:
                    out.errors[cid] = exc.failure.message
                    if exc.failure.outcome == "failed":
                        out.failed.add(cid)
                    if exc.failure.paid is not None:  # no text, billed all the same
                        out.unusable[cid] = _batch_cost(endpoint, exc.failure.paid, prices)
                continue
            completion.cost = _batch_cost(endpoint, completion, prices)
            if invalid_utf8:  # the line's bytes, replaced before the wire read them: kept and flagged
                completion.raw["invalid_utf8"] = True
            out.errors.pop(cid, None)
            out.failed.discard(cid)
            out.answers[cid] = completion
        elif isinstance(err, dict) and isinstance(err.get("code"), str) and err["code"] in NOT_RUN_CODES:
            out.not_run.append(cid)
        else:
            what = err if isinstance(err, dict) else {}
            msg = " ".join(str(what.get("message") or "a batch line without a response").split())
            out.errors[cid] = f"batch: {msg}" + (f" [{what['code']}]" if what.get("code") else "")
    out.not_run = [cid for cid in dict.fromkeys(out.not_run) if cid not in out.answers and cid not in out.errors]
    if flagged := sorted(cid for cid, c in out.answers.items() if c.raw.get("invalid_utf8")):
        log.warning("%d batch answer(s) hold bytes that are not UTF-8 or a lone UTF-16 surrogate (%s): decoded with "
                    "U+FFFD in their place, the answers kept and flagged (invalid_utf8)", len(flagged), _some(flagged))
    if repeated:
        log.warning("batch %s has %d more line(s) for requests already answered (%s): the first answer is kept, "
                    "the others are in the provider's file", out.batch_id, len(repeated), _some(sorted(set(repeated))))
    if odd := sorted(cid for cid, c in out.answers.items() if c.raw.get("unusable_numbers")):
        fields = sorted({str(f) for cid in odd for f in out.answers[cid].raw["unusable_numbers"]})
        log.warning("%d batch answer(s) report usage that is not a usable number (%s; %s): recorded as unknown "
                    "(null), so their cost is unknown", len(odd), ", ".join(fields), _some(odd))
    if fatal:
        top = max(set(fatal), key=fatal.count)
        out.reason = top + (f" ({fatal.count(top)} of {len(lines)} lines)" if len(fatal) > 1 else "")
    return out
