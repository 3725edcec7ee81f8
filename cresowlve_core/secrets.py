"""Keep API keys out of everything the project writes.

Keys are only ever read from environment variables *by name*. As a second line of defence,
writers of notebooks, reports and run directories pass their text through :func:`redact`.
"""

from __future__ import annotations

import os
import re

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)", re.I)
MIN_SECRET_LEN = 8
REDACTED = "***REDACTED***"


def find_secret_values(extra_names: list[str] | None = None) -> list[str]:
    """Values of environment variables whose names look like credentials (longest first)."""
    names = {n for n in os.environ if _SECRET_NAME.search(n)}
    names.update(extra_names or [])
    values = {os.environ[n] for n in names if len(os.environ.get(n, "")) >= MIN_SECRET_LEN}
    return sorted(values, key=len, reverse=True)


def redact(text: str, secrets: list[str]) -> str:
    """``text`` with every occurrence of each secret value replaced by the redaction marker."""
    for s in secrets:
        if s in text:
            text = text.replace(s, REDACTED)
    return text


_URL_USERINFO = re.compile(r"(?<=://)[^/@\s]*@")
_URL_KEY_PARAM = re.compile(r"([?&](?:api[-_]?key|key|token|access[-_]?token|sig|signature)=)[^&#\s]*", re.I)


def strip_url_credentials(url: str) -> str:
    """``https://user:pass@host/v1?api-key=abc`` -> ``https://host/v1?api-key=***REDACTED***``."""
    return _URL_KEY_PARAM.sub(lambda m: m.group(1) + REDACTED, _URL_USERINFO.sub("", url))


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
