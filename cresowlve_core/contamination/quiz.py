"""The two contamination quizzes of CresOWLve App. A (after Golchin & Surdeanu, 2025).

* **Bias detector quiz (BDQ)**: options A–C are the three perturbations in a seeded random order,
  D is "none of the provided options"; the original is absent, so any A–C answer reveals a
  positional preference. A position of A–C is *non-preferred* when chosen fewer than N/4 times
  (N = all quiz questions, invalid and withheld answers included, as in the paper's k/4 = 145 for
  k = 580).
* **Bias compensator quiz (BCQ)**: the original goes to a seeded random non-preferred position,
  two of the three perturbations (seeded) fill the other A–C positions, D is "none"; repeated
  ``n_repeats`` times with independent randomness per repeat, each repeat a layout of its own.

Each quiz is one ``map_with_resume`` run. :func:`parse_choice` takes the first option letter of the
reply that stands as an option (never the article of ``A good question…``); anything else is *invalid* and counted. A refused or filtered reply is not parsed: it is
*withheld*, counted apart from the invalid ones: both pick no option, but an invalid answer counts
as wrong while a withheld one is no answer, left out of the accuracies. So is a reply *cut off* at
the token limit before it named an option (``outcome`` truncated): the quiz-taker stopped before
an answer, which says nothing of what it recognises. A base-model quiz-taker (provider profile
``base_model``: the embedded Gemma 3 270M) gets the few-shot completion prompt
``contamination_quiz_fewshot`` over ``/completions``; its continuation is parsed the same way.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from cresowlve_core.contamination.itemstats import (
    CHANCE,
    MIN_ITEMS,
    bcq_items,
    cut_off_mask,
    majority_test,
    too_few,
    withheld_mask,
)
from cresowlve_core.llm.base_model import completion_params, user_message
from cresowlve_core.llm.client import LLMClient
from cresowlve_core.llm.types import NOT_AN_ANSWER, Endpoint
from cresowlve_core.prompts import Prompt, load_prompt
from cresowlve_core.runtime import (
    ClientOptions,
    Manifest,
    MapResult,
    RunDir,
    map_with_resume,
    new_manifest,
    record_adaptations,
)
from cresowlve_core.runtime.outcomes import is_withheld, outcome_counts, outcome_fields, record_withheld, served_models
from cresowlve_core.runtime.step import Step, Variant
from cresowlve_core.stats import stable_seed, wilson_interval

PROMPT = "contamination_quiz"
FEWSHOT_PROMPT = "contamination_quiz_fewshot"
LETTERS = ("A", "B", "C", "D")
PLACEABLE = ("A", "B", "C")
NONE_OPTION = "None of the provided options."
MAX_PARSE_CHARS = 4_000
#: the characters of a reply a quiz record keeps (``raw``)
RAW_CHARS = 2_000
# possessive quantifiers (*+) where two runs of the same characters meet: backtracking between
# them was quadratic (4,000 "[" took 1 s); no run can give back anything the next token needs
_LEAD = re.compile(r"^([\s*_`\"'«“(\[]*+)(?:i(?:\s++(?:think|believe|guess|choose|pick|would\s++say|will\s++go\s++with)"
                   r"|[’']d\s++say|[’']ll\s++go\s++with)[,:]?\s++)?(?:(?:the\s+)?(?:final\s+)?(?:answer|option|choice|ответ|вариант)[*_`\"']*+\s*+(?:is)?"
                   r"\s*+[:：\-–—]?\s*+|it[’']?s\s++|it\s++is\s++)?([\s*_`\"'«“(\[]*+)([A-D])", re.I)
#: an ``answer/option …: X`` phrase anywhere in the reply (``Answer: option B`` is one answer phrase;
#: the word may be closed by marks: ``**Answer**: B``, the JSON ``{"answer": "B"}``)
_ANYWHERE = re.compile(r"(answer|option|choice|ответ|вариант)[*_`\"']*+\s*+(?:is)?\s*+[:：\-–—]?"
                       r"(?:[\s*_`\"'«“(\[]*+(?:option|choice|вариант)(?=\s))?([\s*_`\"'«“(\[]*+)([A-D])",
                       re.I)
#: LaTeX's box around a final answer (``\\boxed{B}``, ``$\\boxed{\\text{B}}$``, ``\\[ \\boxed{B} \\]``), its content
#: perhaps in a text command
_BOXED = re.compile(r"(?:(?:\$++|\\[(\[])[^\S\n]*+)?\\boxed\s*+\{\s*+(?:\\(?:text|textbf|mathrm|mathbf)\s*+\{([^{}\n]*+)\}"
                    r"|([^{}\n]*+))\s*+\}(?:[^\S\n]*+(?:\$++|\\[)\]]))?")
#: an answer phrase ending right before a boxed answer (``The answer is $\\boxed{B}$``): the box is its letter
_ANSWER_BEFORE = re.compile(r"(?:answer|option|choice|ответ|вариант)[*_`\"']*+\s*+(?:is)?\s*+[:：\-–—]?[\s*_`\"'«“(\[]*+\Z", re.I)
#: the tags of an answer (``<answer>B</answer>``)
_ANSWER_TAG = re.compile(r"<\s*+(/?)\s*+answer\s*+>", re.I)
#: the words of an ``_ANYWHERE`` phrase that state the reply's answer (``option B``, ``choice B``
#: may name an option the reply only discusses: ``Option A - reworded. Answer: C``)
_ANSWER_WORDS = ("answer", "ответ")
_MENTION_WORD = re.compile(r"option|choice|вариант", re.I)
#: a label stating the reply's answer (``Answer:``, ``**Answer:**``, ``**Answer**:``, ``"answer":``, ``Ответ:``)
_ANSWER_LABEL = re.compile(r"\b(?:answer|ответ)[*_`\"']*+\s*+[:：–—]", re.I)
#: the closing mark of each opening one a letter may be wrapped in: ``**B**``, ``(B)``, ``"B"``, ``«B»``
_CLOSING = {"*": "*", "_": "_", "`": "`", '"': '"', "'": "'", "«": "»", "“": "”", "(": ")", "[": "]"}
#: after the letter (and a space or so): an option's separator from its text, ``B) text``, ``B - text``,
#: ``D (none of the provided options)`` (not the full stop of an abbreviation, ``A.I.``, nor the hyphen
#: of a word, ``A-level``)
_SEPARATOR = re.compile(r"\.(?![^\W\d_])|[,;!)\]]|\s*+[:：]|\s*+[-–—](?![^\W\d_])|\s++\(")
#: after the letter: a second option letter (``A, B or C``, ``A/B``, ``(B) or (C)``, ``**B** and **C**``,
#: ``B; C``, ``B, maybe C``, ``B (perhaps C)``), or one in marks of its own right after it (``(B)(C)``,
#: ``(B) (C)``, ``**B****C**``): a hedge that names no one option
_HEDGE_WORD = r"(?i:or|and|maybe|perhaps|possibly|или|и|либо|а\s++может|может|возможно)\b\s*+"
_ANOTHER = re.compile(r"[*_`\"'»”)\]]*+\s*+(?:\(?(?:[,/&;]\s*+(?:" + _HEDGE_WORD + r")*+|(?:" + _HEDGE_WORD + r")++)"
                      r"[*_`\"'«“(\[]*+[A-D]"
                      r"|[*_`\"'«“(\[]*+(?<=[*_`\"'«“(\[])[A-D][*_`\"'»”)\]])(?![^\W\d_])")
#: after the letter: nothing more on its line but the closing marks, full stops and spaces
_ALONE = re.compile(r"[\s*_`\"'»”)\].!]*+$")
#: a letter that ends its line as a statement of a choice, or a question weighing one (``B\nC``, ``A... no, C``,
#: ``A\nActually, C.``, ``no wait, it's C``, ``A. B. C. D.``, ``B\n\nOr C?``): at the start of the line, after a sentence's punctuation or
#: an arrow (``B -> C``), or after ``it's``, ``is``, ``actually``, ``rather``, ``no``, ``wait``, ``hmm``,
#: ``instead``, ``otherwise``, a hedge (``Also C.``, ``B. Or C``, ``B, but maybe C``) or a choosing verb
#: (``make that C``, ``go with C``, ``pick C``, ``I'd say C``, ``change it to C``), in Russian too (``Или C?``,
#: ``Хотя C.``, ``Либо C``, ``это C``); not after any other word
#: (``not C``, ``vitamin C``, ``Option C``), nor after the comma of a list of letters (``Rewordings: A, C.``)
_RESTATED = re.compile(r"(?:^[^\S\n]*+|(?:[.:;!?…—–>→-]|(?<![A-D])(?<![A-D][*_`\"'»”)\]]),)[^\S\n]*+"
                       r"|\b(?i:it[’']?s|it is|is|actually|rather|no|wait|hmm|instead|otherwise"
                       r"|or|also|maybe|perhaps|possibly|make[^\S\n]++(?:it|that)|go(?:ing)?[^\S\n]++with|pick|choose"
                       r"|select|say|(?:switch|change)(?:[^\S\n]++(?:it|that|my[^\S\n]++answer))?[^\S\n]++to"
                       r"|или|либо|хотя|вернее|точнее|скорее|может|возможно|всё-таки|все-таки|нет|это)[,:]?[^\S\n]++)"
                       r"[*_`\"'«“(\[]*+([A-D])(?=(?:[*_`\"'»”)\].!?]|[^\S\n])*+$)", re.M)

#: another option put forward beside the answer (``(C) is also possible``, ``C could also be right``, ``C works
#: too``, ``C тоже возможен``): a sentence whose subject is an option letter, in marks or followed by a verb,
#: that says ``also``/``too`` and ``possible``/``right``/``the original`` within 80 characters (a bound: the
#: lookaheads are linear); not ``C is a rewording too``
_ALSO_WORD = r"(?i:also|too|as\s++well|equally|either|тоже|также)\b"
_CANDIDATE_WORD = (r"(?i:(?:possible|plausible|correct|right|likely|valid|works?|an?\s++(?:option|candidate)"
                   r"|the\s++(?:original|answer|one))\b|возмож|правильн|верн|подходит|оригинал)")
_ALSO_CANDIDATE = re.compile(r"(?:^|[.!?;:,]|\b(?i:and|but|though|although|но|хотя))[^\S\n]*+[*_`\"'«“(\[]*+([A-D])"
                             r"(?:[*_`\"'»”)\]]++|(?=[^\S\n]++(?i:is|are|could|might|may|would|works?|seems|looks|also|too"
                             r"|тоже|также)\b))"
                             r"(?=[^.!?\n]{0,80}?\b" + _ALSO_WORD + r")(?=[^.!?\n]{0,80}?\b" + _CANDIDATE_WORD + r")", re.M)

#: an answer phrase that ends the reply before naming anything (``Wait, actually the answer is``)
_UNFINISHED_ANSWER = re.compile(r"\b(?:answer|ответ)[*_`\"']*+(?:\s++(?:is|would\s++be|should\s++be|must\s++be)|\s*+[:：\-–—])"
                                r"[\s*_`\"'«“(\[:：]*+\Z", re.I)
#: a sentence that reconsiders the answer given (``Wait,``, ``Actually``, ``Hmm``, ``On second thought``,
#: ``Let me reconsider``, ``No,``): a reply cut off after one may have been about to change its answer
_RECONSIDERING = re.compile(r"(?:^|[.!?…;:,—–(])[^\S\n]*+[*_`\"'«“(\[]*+"
                            r"(?i:wait|actually|hmm+|hold\s++on|on\s++second\s++thought|alternatively|or\s++rather"
                            r"|reconsider\w*|let\s++me\s++(?:re\w+|double[-\s]check|check|think|verify)"
                            r"|no(?=[,.!:]|\s++wait)|подожд\w*|впрочем|хотя|нет(?=[,.!:]))", re.M)

#: a letter later on the line of the reply's answer (``B (70%), C (30%)``, ``B: 0.7, C: 0.3``), not
#: inside a run of marks, not a word's last letter, not after ``not``, ``не`` or an ``option``/``choice``
#: word (``B, not C``, ``Answer: B (option C, by contrast, is reworded)``); :func:`_names_another`
#: takes it when no word follows it on the line (``B. C) is a rewording`` discusses C)
_OTHER_ON_LINE = re.compile(r"(?<![\w*_`\"'«“(\[])(?<!(?i:not) )(?<!(?i:не) )(?<!(?i:option|choice) )(?<!(?i:вариант) )"
                            r"([*_`\"'«“(\[]*+)([A-D])")
_WORD_LETTER = re.compile(r"[^\W\d_]")


def _names_another(rest: str, letter: str) -> bool:
    """Whether ``rest``, the rest of the line of the reply's answer ``letter``, names another option
    standing as one (:func:`_stands_as_option`): a hedge between two options."""
    return any(m.group(2) != letter and _stands_as_option(m.group(1), rest[m.end():])
               and not _WORD_LETTER.search(rest, m.end()) for m in _OTHER_ON_LINE.finditer(rest))


def _stands_as_option(opening: str, after: str) -> bool:
    """Whether the letter followed by ``after`` (the rest of its line), wrapped in ``opening`` (the
    marks before it), stands as an option rather than as the first word of a sentence: alone on its
    line, closed by a mark it was opened with (``**B** is…``, ``(B) the…``), or followed by ``)``,
    ``]``, ``.``, ``:``, ``-``, ``,`` and the like. ``A good question…``, ``A is…``, ``B because…``,
    ``C'est…``, ``A or B``, ``A, B or C`` do not: the same rule for every letter, so no position gains
    answers by its letter being an English word."""
    closing = {_CLOSING[c] for c in opening if c in _CLOSING}
    return not _ANOTHER.match(after) and bool(_ALONE.match(after) or (after[:1] and after[0] in closing) or _SEPARATOR.match(after))


@dataclass(frozen=True)
class QuizUnit:
    """One quiz question: the options (A–D) and, for the BCQ, the original's letter."""

    quiz: str  # "bdq" or "bcq"
    set: str
    lang: str
    id: str
    repeat: int
    options: tuple[str, str, str, str]
    correct: str | None

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.lang, self.id, self.repeat)


def parse_choice(text: str | None, cut_off: bool = False) -> str | None:
    """The option letter a quiz reply names, else None (invalid).

    Accepted at the start of the reply: ``B``, ``B)``, ``(B)``, ``B.``, ``**B**``, ``Answer: B``,
    ``Option B``, ``The answer is B``, ``Ответ: B``, ``B) the option's text``; else an
    ``answer/option …: X`` phrase anywhere. The letter must stand as an option
    (:func:`_stands_as_option`): ``A good question, but I cannot tell.`` names none. Lower-case
    letters only count after such a word. The reply must name one option: every ``answer …: X``
    phrase names the same letter (and a bare letter at the start); without one, every
    ``option/choice X`` phrase does, the one at the start too. ``Option A - reworded. Option B -
    reworded. Answer: C`` names C; ``Answer: B … the answer is C`` and ``Option A - reworded\nOption
    C - the original`` none. A reply ``cut_off`` at the token limit with no answer phrase nor bare
    letter stopped before its answer: ``Looking at each:\n- Option A - reworded`` names none, and so does one
    cut off after reconsidering its answer (``B\n\nWait, actually``), or any reply ending in an answer
    phrase that names nothing (``… the answer is``). A reply
    that repeats the options (``A) text\nB) text…``, ``A. B. C. D.``) or ends a line with another
    letter (:data:`_RESTATED`: ``A... no, C``, ``B\nC``) names none either, and so does one whose
    ``Answer:`` names no option letter (``Option A - reworded. Answer: none of them``).
    """
    if not text:
        return None
    head = _answer_marks_as_words(text[:MAX_PARSE_CHARS])
    lead = None
    stated_at: dict[str, int] = {}  # the end of the last statement of each letter the reply names
    lines = [line for line in head.splitlines() if line.strip()]
    if lines and (first := _line_option(lines[0])) is not None:
        lead, rest = first
        stated_at[lead] = head.find(lines[0]) + len(lines[0]) - len(rest)
        if _names_another(rest, lead):
            return None
        # the reply repeats the options (``A) text\nB) text…``): it names none of them
        if not _ALONE.match(rest) and any(o is not None and o[0] != lead and not _ALONE.match(o[1])
                                          for o in map(_line_option, lines[1:])):
            return None
    standing = [m for m in _ANYWHERE.finditer(head) if _stands_as_option(m.group(2), head[m.end():].split("\n", 1)[0])]
    # an answer label naming no option (``Answer: none of them``, ``Ответ: В`` in Cyrillic): the reply's
    # answer is no option, whatever other options it names or discusses
    if {m.start() for m in _ANSWER_LABEL.finditer(head)} - {m.start() for m in standing} \
            or _UNFINISHED_ANSWER.search(head):
        return None
    # a second option weighed on an answer's line: the first answer phrase of a line is read with the rest
    # of it, which holds every later one's rest (one look per line: many answers on a line stay linear)
    first_answer_of_line = {head.rfind("\n", 0, m.start()): m for m in reversed(standing)
                            if m.group(1).lower() in _ANSWER_WORDS}
    if any(_names_another(head[m.end():].split("\n", 1)[0], m.group(3).upper())
           for m in first_answer_of_line.values()):
        return None
    stated = [(m.group(1).lower() in _ANSWER_WORDS, m.group(3).upper()) for m in standing]
    answers = {letter for is_answer, letter in stated if is_answer}
    if lead is not None:
        named = {lead} if answers <= {lead} else set()
    elif cut_off and not answers:
        return None
    else:
        named = answers or {letter for _, letter in stated}
    # a reply that ends a line with another letter changed its mind or hedged: it names no one option
    restated = list(_RESTATED.finditer(head)) if len(named) == 1 else []
    named |= {m.group(1) for m in restated}
    # another option put forward as well (``(B)\n\n(C) is also possible``) hedges between them
    named |= {m.group(1) for m in _ALSO_CANDIDATE.finditer(head)} if len(named) == 1 else set()
    if len(named) != 1:
        return None
    choice = named.pop()
    # cut off while reconsidering its answer (``B\n\nWait, actually``): it may have been about to change it
    for m in standing:
        stated_at[m.group(3).upper()] = max(stated_at.get(m.group(3).upper(), 0), m.end())
    for m in restated:
        stated_at[m.group(1)] = max(stated_at.get(m.group(1), 0), m.end(1))
    if cut_off and _RECONSIDERING.search(head, stated_at.get(choice, 0)):
        return None
    return choice


def _answer_marks_as_words(text: str) -> str:
    """``text`` with its answer marks written as an answer phrase: a boxed answer ``\\boxed{B}`` (as
    reasoning models are told to give one) as ``Answer: B``, an answer tag ``<answer>`` as ``Answer:``
    (its closing tag dropped); right after an answer phrase (``The answer is $\\boxed{B}$``) the mark
    is only the letter's."""
    def label(start: int) -> str:
        return "" if _ANSWER_BEFORE.search(text, max(0, start - 40), start) else "Answer: "

    def unbox(m: re.Match[str]) -> str:
        return label(m.start()) + (m.group(1) if m.group(1) is not None else m.group(2)).strip()

    text = _BOXED.sub(unbox, text)
    return _ANSWER_TAG.sub(lambda m: "" if m.group(1) else label(m.start()), text)


def _line_option(line: str) -> tuple[str, str] | None:
    """The option letter a reply's line starts with (``B``, ``(B)``, ``Answer: B``, ``B) text``) when it
    stands as an option, not in an ``Option A - …`` phrase, and the rest of the line after it."""
    m = _LEAD.match(line)
    if m and (m.group(3).isupper() or re.match(r"^\W*(answer|option|choice|ответ|вариант)", line, re.I)) \
            and _stands_as_option(m.group(1) + m.group(2), line[m.end():]) \
            and not _MENTION_WORD.search(m.group(0)):  # ``Option A - reworded`` is read in parse_choice
        return m.group(3).upper(), line[m.end():]
    return None


def recorded_choice(record: dict[str, Any]) -> str | None:
    """The option a stored quiz record names under the current :func:`parse_choice`: its ``raw``
    text read again, so that a record made under an older rule meets the current one (the
    article of ``A good question…`` is no option A), as the perturbations are re-validated. A
    withheld reply names none; a reply longer than the record keeps keeps the choice it was given."""
    if record_withheld(record):
        return None
    raw = record.get("raw")
    return (parse_choice(raw, cut_off=record.get("outcome") == "truncated") if isinstance(raw, str)
            and len(raw) < RAW_CHARS else record.get("choice"))


def bdq_options(perturbations: Sequence[str], rng: np.random.Generator) -> tuple[tuple[str, str, str, str], None]:
    """A–C: the three perturbations in a random order; D: none. No correct answer."""
    if len(perturbations) != 3:
        raise ValueError("the BDQ needs exactly three perturbations")
    order = rng.permutation(3)
    a, b, c = (perturbations[i] for i in order)
    return (a, b, c, NONE_OPTION), None


def bcq_options(original: str, perturbations: Sequence[str], non_preferred: Sequence[str],
                rng: np.random.Generator) -> tuple[tuple[str, str, str, str], str]:
    """The original at a random non-preferred position (of A–C), two of the perturbations (a random
    pick, in a random order) at the other two, D: none. Returns the options and the original's letter."""
    if len(perturbations) != 3:
        raise ValueError("the BCQ needs exactly three perturbations")
    allowed = [p for p in non_preferred if p in PLACEABLE]
    if not allowed:
        raise ValueError("no non-preferred position among A, B, C")
    pos = allowed[int(rng.integers(len(allowed)))]
    rest = [perturbations[i] for i in rng.permutation(3)]
    slots: list[str] = []
    for letter in PLACEABLE:
        slots.append(original if letter == pos else rest.pop(0))
    return (slots[0], slots[1], slots[2], NONE_OPTION), pos


def bcq_repeats(original: str, perturbations: Sequence[str], non_preferred: Sequence[str], n_repeats: int,
                seed: int, lang: str, item_id: str) -> list[tuple[tuple[str, str, str, str], str]]:
    """The BCQ layouts of one item's ``n_repeats`` repeats: each drawn with its own seeded
    randomness (:func:`bcq_rng`), redrawn while it repeats an earlier repeat's layout (as long as
    distinct layouts remain), so every repeat is a different question, never a cache hit of another."""
    out: list[tuple[tuple[str, str, str, str], str]] = []
    for rep in range(n_repeats):
        rng = bcq_rng(seed, rep, lang, item_id)
        layout = bcq_options(original, perturbations, non_preferred, rng)
        for _ in range(64):  # at least 2 positions x 6 orders = 12 layouts; a few redraws suffice
            if layout not in out:
                break
            layout = bcq_options(original, perturbations, non_preferred, rng)
        out.append(layout)
    return out


def bdq_rng(seed: int, lang: str, item_id: str) -> np.random.Generator:
    return stable_seed(seed, "bdq", lang, item_id)


def bcq_rng(seed: int, repeat: int, lang: str, item_id: str) -> np.random.Generator:
    """Independent randomness per repeat and item."""
    return stable_seed(seed, "bcq", repeat, lang, item_id)


def n_answered(counts: dict[str, int]) -> int:
    """The BDQ's N: replies that name a position and replies with no option letter (``invalid``, as the
    paper's k/4 counts them); withheld (refused or filtered) and cut-off replies are no answer, not in N."""
    return sum(counts.get(p, 0) for p in LETTERS) + counts.get("invalid", 0)


def non_preferred_positions(counts: dict[str, int], n: int) -> tuple[list[str], bool]:
    """Positions of A–C chosen fewer than ``n/4`` times. If none is, the least chosen of A–C
    (ties: all of them) and ``False`` for "no position is truly non-preferred"."""
    found = [p for p in PLACEABLE if counts.get(p, 0) < n / 4]
    if found:
        return found, True
    least = min(counts.get(p, 0) for p in PLACEABLE)
    return [p for p in PLACEABLE if counts.get(p, 0) == least], False


def settled_non_preferred(counts: dict[str, int], n: int, n_more: int) -> list[str] | None:
    """The non-preferred positions (:func:`non_preferred_positions`) the BDQ will give once up to
    ``n_more`` more questions are answered, ``counts`` and ``n`` being its answers so far, when no
    answers to them can change the positions; else None. Settled: every position of A–C stays below
    the ``N/4`` threshold whatever the new answers are (it stays so when all of them pick it), or stays
    at or above it (when none picks it and all are answered); ``[]``: no answer at all, no BCQ."""
    if n_more == 0:
        return non_preferred_positions(counts, n)[0] if n else []
    threshold = (n + n_more) / 4
    below = [p for p in PLACEABLE if counts.get(p, 0) + n_more < threshold]
    above = [p for p in PLACEABLE if counts.get(p, 0) >= threshold]
    return below if below and len(below) + len(above) == len(PLACEABLE) else None


def _options_text(prompt: Prompt, unit: QuizUnit, base_model: bool) -> list[dict[str, str]]:
    a, b, c, d = (" ".join(o.split()) for o in unit.options)
    return user_message(prompt.render(a=a, b=b, c=c, d=d), base_model)


#: the quiz call: the chat prompt, or the few-shot completion prompt for a base model
QUIZ: Step[QuizUnit] = Step("contamination_quiz",
            chat=Variant(PROMPT, lambda p, u: _options_text(p, u, False), parse_choice),
            fewshot=Variant(FEWSHOT_PROMPT, lambda p, u: _options_text(p, u, True), parse_choice,
                            gen=completion_params))


def quiz_messages(unit: QuizUnit, base_model: bool = False) -> tuple[list[dict[str, str]], str]:
    variant = QUIZ.fewshot if base_model and QUIZ.fewshot else QUIZ.chat
    prompt = load_prompt(variant.prompt_name(unit))
    return variant.messages(prompt, unit), prompt.tag


def quiz_manifest(quiz: str, endpoint: Endpoint, options: ClientOptions, n_units: int,
                  identity: dict[str, Any] | None = None) -> Manifest:
    """The manifest of one quiz's run (``bdq`` or ``bcq``) by ``endpoint`` (its client's)."""
    step = QUIZ.on(endpoint, options)
    return new_manifest(
        f"contamination_{quiz}", model=endpoint.model, base_url=endpoint.base_url, api_key_env=endpoint.api_key_env,
        n_items=n_units, prompts=step.tags(), seed=options.seed, temperature=options.temperature,
        max_tokens=step.max_tokens, options=options.model_dump(), sent=step.sent(endpoint),
        identity=identity or {})


async def aquiz(quiz: str, units: Sequence[QuizUnit], run: RunDir, client: LLMClient, options: ClientOptions, *,
                identity: dict[str, Any] | None = None, progress: bool = True) -> MapResult[QuizUnit]:
    """Ask every quiz question of one quiz (``bdq`` or ``bcq``) into ``run/<quiz>.jsonl``."""
    step = QUIZ.on(client.endpoint, options)
    manifest = run.begin(quiz_manifest(quiz, client.endpoint, options, len(units), identity))

    async def call(unit: QuizUnit, previous: dict[str, Any] | None) -> dict[str, Any]:
        req = step.request(unit)
        c = await client.complete(req.messages, req.params, prompt_version=req.tag)
        # a refusal picks no option: no answer
        choice = None if is_withheld(c) else step.parse(c.text, cut_off=c.outcome == "truncated")
        return {"key": list(unit.key), "status": "ok", **outcome_fields(c), "set": unit.set, "lang": unit.lang,
                "id": unit.id, "repeat": unit.repeat, "correct": unit.correct, "choice": choice,
                "is_correct": None if unit.correct is None else choice == unit.correct,
                "raw": c.text[:RAW_CHARS], "usage": c.usage.model_dump(), "cost": c.cost}

    result = await map_with_resume(run, f"{quiz}.jsonl", units, key=lambda u: u.key, call=call,
                                   concurrency=options.concurrency, progress=progress, desc=quiz.upper())
    for k, r in result.records.items():  # the records on disk stay as written; their choices are read again
        if r.get("status") == "ok" and (choice := recorded_choice(r)) != r.get("choice"):
            result.records[k] = {**r, "choice": choice,
                                 "is_correct": None if r.get("correct") is None else choice == r.get("correct")}
    recs = [r for r in result.records.values() if r.get("status") == "ok"]
    run.finish(record_adaptations(manifest, client), stopped=result.stopped, summary={
        "n_units": result.n_units, "n_done": result.n_done, **outcome_counts(recs), "n_error": result.n_error,
        "served_models": served_models(recs),
        "n_invalid": sum(r.get("choice") is None and not record_withheld(r) and r.get("outcome") != "truncated"
                         for r in recs),
        "n_cut_off": sum(r.get("choice") is None and r.get("outcome") == "truncated" for r in recs),
        "stopped": result.stopped})
    return result


# ------------------------------------------------------------------ statistics


def position_counts(choices: Sequence[str | None], outcomes: Sequence[str | None] | None = None) -> dict[str, int]:
    """Counts of A, B, C, D, ``invalid`` (a reply with no option letter), ``withheld`` (the
    quiz-taker refused or its provider's filter stopped it) and ``cut_off`` (a reply cut off at the
    token limit before naming an option); ``outcomes``, one per choice, say which."""
    out = {p: 0 for p in LETTERS} | {"invalid": 0, "withheld": 0, "cut_off": 0}
    for c, outcome in zip(choices, outcomes if outcomes is not None else [None] * len(choices), strict=True):
        out[c if c in LETTERS else "withheld" if outcome in NOT_AN_ANSWER else "cut_off" if outcome == "truncated"
            else "invalid"] += 1
    return out


def uniform_gof(counts: dict[str, int]) -> dict[str, float]:
    """χ² goodness of fit of the valid answers' positions against uniform over A–D."""
    obs = np.array([counts.get(p, 0) for p in LETTERS], dtype=float)
    if obs.sum() == 0:
        return {"chi2": float("nan"), "dof": 3, "p": float("nan"), "n_valid": 0}
    res = sps.chisquare(obs)
    return {"chi2": float(res.statistic), "dof": 3, "p": float(res.pvalue), "n_valid": int(obs.sum())}


def accuracy_test(k: int, n: int, chance: float = CHANCE) -> dict[str, Any]:
    """Accuracy ``k/n`` with a Wilson 95% CI and an exact one-sided binomial test against ``chance``
    (H1: accuracy > chance). Invalid answers count as wrong (they are in ``n``); withheld ones are not."""
    if n == 0:
        return {"k": 0, "n": 0, "accuracy": float("nan"), "low": float("nan"), "high": float("nan"),
                "p": float("nan")}
    low, high = wilson_interval(k, n)
    p = sps.binomtest(k, n, chance, alternative="greater").pvalue
    return {"k": int(k), "n": int(n), "accuracy": k / n, "low": float(low), "high": float(high), "p": float(p)}


def bcq_table(records: pd.DataFrame, n_repeats: int, min_items: int = MIN_ITEMS) -> pd.DataFrame:
    """Per set: accuracy in each repeat (k of n items, Wilson 95% CI; descriptive), then one
    ``items`` row, the test over items: ``k`` of ``n`` items right in a majority of their repeats,
    its Wilson CI and the exact one-sided binomial p against 25% (:func:`~cresowlve_core.contamination.
    itemstats.majority_test`), ``mean_item_accuracy`` beside it. Repeats are never pooled as
    independent trials (they share the items). With fewer than ``min_items`` items p is not given
    and ``test`` says so. Invalid answers (no option letter) count as wrong; withheld ones (refused or
    filtered) and ``cut_off`` ones (stopped at the token limit before naming an option) are no answer:
    left out of ``k`` and ``n`` (and of the items' accuracies), counted apart."""
    cols = ["set", "repeat", "k", "n", "accuracy", "low", "high", "p", "invalid", "withheld", "cut_off",
            "mean_item_accuracy", "test"]
    if records.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    items = bcq_items(records)
    records = records.assign(_withheld=withheld_mask(records), _cut_off=cut_off_mask(records))
    records = records.assign(_invalid=records["choice"].isna() & ~records["_withheld"] & ~records["_cut_off"])
    for s, part in records.groupby("set", sort=True):
        for r in range(n_repeats):
            rep = part[part["repeat"] == r]
            answered = rep[~rep["_withheld"] & ~rep["_cut_off"]]
            k = int((answered["choice"] == answered["correct"]).sum())
            a = accuracy_test(k, len(answered))
            rows.append({"set": s, "repeat": str(r + 1), "k": a["k"], "n": a["n"], "accuracy": a["accuracy"],
                         "low": a["low"], "high": a["high"], "p": float("nan"),
                         "invalid": int(rep["_invalid"].sum()), "withheld": int(rep["_withheld"].sum()),
                         "cut_off": int(rep["_cut_off"].sum()), "mean_item_accuracy": float("nan"),
                         "test": "descriptive (one repeat)"})
        m = majority_test(items[items["set"] == s])
        few = too_few(m["n"], min_items=min_items)
        rows.append({"set": s, "repeat": "items", "k": m["k"], "n": m["n"], "accuracy": m["share"], "low": m["low"],
                     "high": m["high"], "p": float("nan") if few else m["p"], "invalid": int(part["_invalid"].sum()),
                     "withheld": int(part["_withheld"].sum()), "cut_off": int(part["_cut_off"].sum()),
                     "mean_item_accuracy": m["mean_accuracy"],
                     "test": few or "items right in a majority of repeats: exact binomial vs 25%, one-sided"})
    return pd.DataFrame(rows, columns=cols)
