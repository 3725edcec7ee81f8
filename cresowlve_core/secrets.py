"""Keep API keys out of everything the project writes.

Keys are only ever read from environment variables *by name*. As a second line of defence,
writers of notebooks, reports and run directories pass their text through :func:`redact`.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Callable
from typing import Any

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)", re.I)
MIN_SECRET_LEN = 8
REDACTED = "***REDACTED***"


#: ``CRESOWLVE_API_KEY_ENV``, ``CRESOWLVE_JUDGE_API_KEY_ENV``: the *name* of the variable holding a key
_KEY_NAME_VARIABLE = re.compile(r"_KEY_ENV$", re.I)


def _names_a_set_variable(name: str) -> bool:
    """``name`` (``*_KEY_ENV``) holds the name of a variable that is set: a name the manifests record,
    not a key (a key put there by mistake names no variable, and stays a secret)."""
    return bool(_KEY_NAME_VARIABLE.search(name)) and os.environ.get(name, "") in os.environ


def find_secret_values(extra_names: list[str] | None = None) -> list[str]:
    """Values of environment variables whose names look like credentials (longest first), but for
    the names of key variables (:func:`_names_a_set_variable`)."""
    names = {n for n in os.environ if _SECRET_NAME.search(n) and not _names_a_set_variable(n)}
    names.update(extra_names or [])
    values = {os.environ[n] for n in names if len(os.environ.get(n, "")) >= MIN_SECRET_LEN}
    return sorted(values, key=len, reverse=True)


def redact(text: str, secrets: list[str]) -> str:
    """``text`` with every occurrence of each secret value replaced by the redaction marker."""
    for s in secrets:
        if s in text:
            text = text.replace(s, REDACTED)
    return text


#: ``scheme://user:password@``: the user info, in the characters RFC 3986 allows there (so it never
#: runs past a quote, a slash or a space of the text around the URL, e.g. JSON).
_URL_USERINFO = re.compile(r"(?<=://)([\w\-.~%!$&'()*+,;=]*)(?::([\w\-.~%!$&'()*+,;=:]*))?@")
#: ``?name=value`` / ``&name=value``: the name is bounded, so the scan stays linear in any text.
_URL_PARAM = re.compile(r"([?&])([\w.\-]{1,64})=([^&#\s\"'<>\\]*)")
#: Query parameter names whose values are credentials (``api-key``, ``key``, ``access_token``, ``sig``,
#: ``X-Amz-Signature``, ``client_secret``, ``password`` ...).
_KEY_PARAM_NAME = re.compile(r"(?:[\w.\-]*[_\-.])?(?:api[-_]?key|apikey|key|token|access[-_]?token|auth|"
                             r"secret|client[-_]?secret|password|passwd|pwd|sig|signature|credential)(?:[_\-.][\w.\-]*)?", re.I)

#: Credential values seen in URLs in this process (stripped wherever they appear later, too).
_SEEN_URL_SECRETS: set[str] = set()


def _remember(value: str | None) -> None:
    """Note a credential stripped from a URL, to strip it wherever it appears bare later. Short
    values are not noted (the URL itself is always stripped): a password such as ``pass`` would
    otherwise blank that word out of every later message of the process."""
    if value and REDACTED not in value and len(value) >= MIN_SECRET_LEN:
        _SEEN_URL_SECRETS.add(value)


def _strip_userinfo(m: re.Match[str]) -> str:
    _remember(m.group(2))
    return ""


def _strip_key_param(m: re.Match[str]) -> str:
    if not _KEY_PARAM_NAME.fullmatch(m.group(2)) or not m.group(3):
        return m.group(0)
    _remember(m.group(3))
    return f"{m.group(1)}{m.group(2)}={REDACTED}"


def strip_url_credentials(url: str) -> str:
    """``https://user:pass@host/v1?api-key=abc`` -> ``https://host/v1?api-key=***REDACTED***``.

    Works on any text (every URL in it); the values stripped are remembered for :func:`scrub`.
    """
    if "@" in url:
        url = _URL_USERINFO.sub(_strip_userinfo, url)
    if "=" in url:
        url = _URL_PARAM.sub(_strip_key_param, url)
    return url


def remember_url_secrets(url: str | None) -> None:
    """Note the credentials of ``url`` (a base URL given by the user) before anything is written."""
    if url:
        strip_url_credentials(url)


def remember_env(*names: str | None) -> None:
    """Note the values of the named key variables (whatever their names) for :func:`scrub`."""
    for name in names:
        value = os.environ.get(name) if name else None
        if value and len(value) >= MIN_SECRET_LEN:
            _SEEN_URL_SECRETS.add(value)


def known_secrets(extra_names: list[str] | None = None) -> list[str]:
    """Every secret value this process knows: credential-like variables, ``extra_names``, the key
    variables and URL credentials noted so far (longest first)."""
    return sorted(set(find_secret_values(extra_names)) | _SEEN_URL_SECRETS, key=len, reverse=True)


def scrub(text: str, secrets: list[str] | None = None) -> str:
    """The redaction choke point for everything the project writes or prints: every known secret
    value (:func:`known_secrets`, plus ``secrets``) and every URL's credentials are removed."""
    text = strip_url_credentials(text)  # first: the URLs' own credentials are noted whole, then redacted bare
    values = known_secrets() if secrets is None else sorted(set(secrets) | _SEEN_URL_SECRETS, key=len, reverse=True)
    return redact(text, values)


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_KEY_PREFIXES = ("sk-", "sk_", "gsk_", "hf_", "xai-", "AIza", "pplx-", "r8_", "ghp_", "github_pat_", "glpat-")


def looks_like_key(value: str) -> bool:
    """True if ``value``, given where a variable *name* belongs, looks like a credential itself.

    Not a valid variable name, a known key prefix (``sk-``, ``hf_``, ...; upper-case names such as
    ``HF_TOKEN`` are names), or a long run of mixed case and digits without underscores.
    """
    v = value.strip()
    if not v:
        return False
    if not _ENV_NAME.match(v):
        return True
    if v == v.upper():
        return False
    if v.startswith(_KEY_PREFIXES):
        return True
    mixed = any(c.islower() for c in v) and any(c.isupper() for c in v) and any(c.isdigit() for c in v)
    return len(v) >= 20 and mixed and "_" not in v


# --------------------------------------------------------------------------- the terminal and the logs


class _ScrubbingStream:
    """A text stream that passes every write through :func:`scrub` (stdout/stderr of the CLI)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(scrub(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _ScrubbingFilter(logging.Filter):
    """Scrubs a log record's message before any handler formats it."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = scrub(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True


def guard_terminal(args: dict[str, Any] | None = None) -> Callable[[], None]:
    """Route stdout, stderr and the root logger's handlers through :func:`scrub`; note the key
    variables (``*api_key_env``) and the base URLs' credentials (``*base_url``) in ``args`` first.
    Returns the function that undoes it (the CLI calls it when the command ends)."""
    for name, value in (args or {}).items():
        if isinstance(value, str) and name.endswith("api_key_env"):
            remember_env(value)
        elif isinstance(value, str) and name.endswith("base_url"):
            remember_url_secrets(value)
    saved = sys.stdout, sys.stderr
    if sys.stdout is not None and not isinstance(sys.stdout, _ScrubbingStream):
        sys.stdout = _ScrubbingStream(sys.stdout)  # type: ignore[assignment]
    if sys.stderr is not None and not isinstance(sys.stderr, _ScrubbingStream):
        sys.stderr = _ScrubbingStream(sys.stderr)  # type: ignore[assignment]
    filt = _ScrubbingFilter()
    handlers = list(logging.getLogger().handlers)
    for h in handlers:
        h.addFilter(filt)
        if isinstance(h, logging.StreamHandler) and h.stream in saved:
            h.setStream(sys.stdout if h.stream is saved[0] else sys.stderr)

    def restore() -> None:
        sys.stdout, sys.stderr = saved
        for h in handlers:
            h.removeFilter(filt)
            if isinstance(h, logging.StreamHandler) and isinstance(h.stream, _ScrubbingStream):
                h.setStream(h.stream._stream)

    return restore
