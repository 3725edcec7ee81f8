"""Every prompt is a versioned template file in this folder.

A file starts with a header line ``# version: N`` (and optional ``# ...`` comment lines); the rest
is the template, with ``$name`` placeholders (:class:`string.Template`, so JSON braces in a
prompt need no escaping). The version goes into cache keys and run manifests: bump it whenever
the text changes, so old cached answers and results never mix with the new prompt.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from functools import cache
from pathlib import Path

PROMPTS_DIR = Path(__file__).resolve().parent
_VERSION = re.compile(r"^#\s*version:\s*(\S+)\s*$")


@dataclass(frozen=True)
class Prompt:
    name: str
    version: str
    template: str

    @property
    def tag(self) -> str:
        """``name@version``, as recorded in manifests and cache keys."""
        return f"{self.name}@{self.version}"

    def render(self, **values: str) -> str:
        try:
            return string.Template(self.template).substitute(values)
        except KeyError as exc:
            raise KeyError(f"prompt {self.tag} needs a value for ${exc.args[0]}") from None


@cache
def load_prompt(name: str) -> Prompt:
    """The prompt file ``prompts/NAME.txt``: its ``# version: N`` line, then the template (comment lines dropped)."""
    path = PROMPTS_DIR / f"{name}.txt"
    if not path.exists():
        known = ", ".join(sorted(p.stem for p in PROMPTS_DIR.glob("*.txt")))
        raise FileNotFoundError(f"no prompt {name!r}; known prompts: {known}")
    lines = path.read_text(encoding="utf-8").splitlines()
    m = _VERSION.match(lines[0]) if lines else None
    if not m:
        raise ValueError(f"{path} must start with a '# version: N' line")
    body = lines[1:]
    while body and body[0].startswith("#"):
        body = body[1:]
    return Prompt(name=name, version=m.group(1), template="\n".join(body).strip() + "\n")


def available() -> list[str]:
    """The names of every prompt file."""
    return sorted(p.stem for p in PROMPTS_DIR.glob("*.txt"))
