"""Prompt.render gives exactly what string.Template.substitute gives: over every prompt file and
over templates with $$, ${braced}, adjacent and repeated placeholders, values holding $ and
braces, a missing value and an invalid placeholder."""

from __future__ import annotations

import random
import string

import pytest

from cresowlve_core.prompts import Prompt, available, load_prompt


def _names(template: str) -> set[str]:
    return {m.group("named") or m.group("braced") for m in string.Template.pattern.finditer(template)
            if m.group("named") or m.group("braced")}


def _value(rng: random.Random) -> str:
    return "".join(rng.choice(["$", "$$", "${x}", "{", "}", "a", " ", "é", "\n", "$name"]) for _ in range(rng.randint(0, 8)))


def test_every_prompt_file_renders_as_string_template_does():
    rng = random.Random(7)
    for name in available():
        p = load_prompt(name)
        values = {k: _value(rng) for k in _names(p.template)}
        assert p.render(**values) == string.Template(p.template).substitute(values), name


@pytest.mark.parametrize("template", [
    "", "plain", "$a", "${a}", "$a$b", "${a}${a}x$a", "$$", "$$a", "$$$a", "x$$y${b}z$$", "tail $a.", "$a_b c",
    "${a}b$$${b}", "$A", "mixed $a and ${b}$$ and $a\n",
])
def test_templates_render_as_string_template_does(template):
    rng = random.Random(template)
    for _ in range(20):
        values = {k: _value(rng) for k in ("a", "b", "a_b", "A")}
        assert Prompt("t", "1", template).render(**values) == string.Template(template).substitute(values)


def test_a_missing_value_and_an_invalid_placeholder_fail_as_before():
    with pytest.raises(KeyError, match=r"prompt t@1 needs a value for \$b"):
        Prompt("t", "1", "$a and $b").render(a="x")
    with pytest.raises(ValueError, match="Invalid placeholder"):
        Prompt("t", "1", "$a costs $5").render(a="x")
    assert Prompt("t", "1", "${a}").render(a=3) == "3"  # str() of a value, as substitute does
