"""Stage 4: the creative-leap filter.

A solver answers the literal and the obfuscated puzzle with the evaluation's own solve prompt
and answer extraction (:mod:`cresowlve_core.evaluation.solve`): chain of thought, the plain prompt
for a thinking model, or, for a base model (provider profile ``base_model``: the embedded Gemma 3
270M), the few-shot completion prompt ``solve_fewshot_en`` over ``/v1/completions``, whose
continuation's first line is the answer (extraction ``completion``). Each answer is scored by
alias-aware exact match against every valid answer (:func:`~cresowlve_core.synthetic.answers.match_answer`);
the basis is recorded. An answer that could not be extracted at all (empty output) is
*unscored*, and an item with an unscored side is not kept.

:func:`leap_outcome` is the decision, a pure function: keep the items solved literally but
failed when obfuscated (the solver has the knowledge but misses the leap).
"""

from __future__ import annotations

from typing import Literal

from cresowlve_core.evaluation.solve import extract_answer, solve_messages, solve_prompt
from cresowlve_core.items import ItemView
from cresowlve_core.prompts import Prompt

Outcome = Literal["kept", "failed_literal", "solved_obfuscated", "unscored"]
SCORING_BASIS = "alias_exact_match"


def solver_prompt(thinking: bool, base_model: bool = False) -> Prompt:
    """The English solve prompt: chain of thought for ordinary models, plain for thinking ones,
    few-shot completion for a base model."""
    return solve_prompt("en", thinking, base_model)


def solver_messages(question: str, prompt: Prompt) -> list[dict[str, str]]:
    """The solver's chat messages for one puzzle text (the answer is never shown)."""
    return solve_messages(ItemView(question=question, answer="-"), prompt)


def extract(text: str | None, fewshot: bool = False) -> tuple[str | None, str]:
    """The extracted answer (``None`` when the output is empty or an echo) and how it was found
    (``fewshot``: the output continues the few-shot solve prompt)."""
    answer, how = extract_answer(text, fewshot=fewshot)
    return (answer or None), how


def leap_outcome(literal_correct: bool | None, obfuscated_correct: bool | None) -> Outcome:
    """``kept`` iff solved literally and failed obfuscated; ``None`` on either side = unscored."""
    if literal_correct is None or obfuscated_correct is None:
        return "unscored"
    if not literal_correct:
        return "failed_literal"
    if obfuscated_correct:
        return "solved_obfuscated"
    return "kept"
