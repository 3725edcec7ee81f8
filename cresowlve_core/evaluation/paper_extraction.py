"""The paper's answer extraction: what its released code takes as a model's prediction.

The rule (``extract_prediction`` in mismayil/cresowlve ``src/cresowlve/evaluate_lm.py``), applied
to the output stripped of surrounding whitespace:

1. the last closed ``<Answer>…</Answer>``, stripped. Tags match in any case. Pairs are read left
   to right, each ``<Answer>`` closed by the first ``</Answer>`` after it, so an inner
   ``<Answer>`` is part of the content ("<Answer>a <Answer>b</Answer>" gives "a <Answer>b"), and a
   closed pair wins over a later unclosed tag;
2. else the text after the first ``<Answer>``, stripped;
3. else the whole output.

Nothing else: no ``Answer:``/``Ответ:`` lines, no ``**`` removed, no placeholder or echo test,
inner whitespace kept. Our own, richer extraction is :func:`cresowlve_core.evaluation.solve.extract_answer`.
"""

from __future__ import annotations

import re

# literal tags searched case-insensitively with the same Unicode case rules as the released regex
_OPEN = re.compile("<answer>", re.I)
_CLOSE = re.compile("</answer>", re.I)


def paper_extract_prediction(output: str | None) -> str:
    """The paper's prediction for one raw model output (linear in its length)."""
    text = (output or "").strip()
    first_open = _OPEN.search(text)
    if first_open is None:
        return text
    last_closed: str | None = None
    opening: re.Match[str] | None = first_open
    while opening is not None:
        closing = _CLOSE.search(text, opening.end())
        if closing is None:
            break  # no later <Answer> can be closed either
        last_closed = text[opening.end():closing.start()]
        opening = _OPEN.search(text, closing.end())
    if last_closed is not None:
        return last_closed.strip()
    return text[first_open.end():].strip()


def paper_prediction(raw: str | None, fewshot: bool = False) -> str:
    """The paper's extraction of a model output; of its first line for a base model's few-shot
    continuation (whose answer ends at the line's end under that protocol, which the paper did not run)."""
    from cresowlve_core.llm.base_model import first_line

    return paper_extract_prediction(first_line(raw) if fewshot else raw)
