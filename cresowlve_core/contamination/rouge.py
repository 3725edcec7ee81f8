"""ROUGE-L F1 on words that works for any script, and an exact-prefix match.

Common ROUGE packages tokenise with an ASCII-only pattern and drop Cyrillic: two identical
Russian texts score 0 there. Here tokens are ``\\w+`` runs (Unicode-aware) of the NFKC-normalised,
casefolded text.
"""

from __future__ import annotations

import re
import unicodedata

_WORD = re.compile(r"\w+")


def words(text: str) -> list[str]:
    """The tokens ROUGE-L compares: ``re.findall(r"\\w+", NFKC(text).casefold())``."""
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


def lcs_length(a: list[str], b: list[str]) -> int:
    """Length of the longest common subsequence of two token lists (O(len(a)·len(b)) time,
    O(min) memory)."""
    if len(a) < len(b):
        a, b = b, a
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b, start=1):
            cur.append(prev[j - 1] + 1 if x == y else max(prev[j], cur[j - 1]))
        prev = cur
    return prev[-1]


def rouge_l(candidate: str, reference: str) -> float:
    """ROUGE-L F1 of ``candidate`` against ``reference`` on words; 0.0 if either has no tokens.

    F1 = 2·P·R / (P + R) with P = LCS / |candidate| and R = LCS / |reference|.
    Example: ``rouge_l("кот сидит на окне", "кот спит на окне")`` = 0.75.
    """
    c, r = words(candidate), words(reference)
    if not c or not r:
        return 0.0
    lcs = lcs_length(c, r)
    if lcs == 0:
        return 0.0
    p, rec = lcs / len(c), lcs / len(r)
    return 2 * p * rec / (p + rec)


def prefix_match(candidate: str, reference: str, k: int = 5) -> bool:
    """True when the first ``min(k, len(reference words))`` words of both agree exactly
    (on the same tokens as :func:`rouge_l`). An empty reference never matches."""
    c, r = words(candidate), words(reference)
    n = min(k, len(r))
    return n > 0 and c[:n] == r[:n]
