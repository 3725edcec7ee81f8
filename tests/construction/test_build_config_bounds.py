"""BuildConfig takes the sample sizes `cresowlve build` takes (--limit, --per-level: integers >= 1), so
`cresowlve report 01_construction -p limit -1` names the parameter instead of failing in random.sample."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from cresowlve_core.construction.build import BuildConfig


@pytest.mark.parametrize("field", ["limit", "per_level"])
@pytest.mark.parametrize("value", [-1, 0])
def test_a_sample_size_below_one_is_refused_by_name(field, value):
    with pytest.raises(ValidationError, match=rf"{field}\n  Input should be greater than or equal to 1"):
        BuildConfig(**{field: value})


def test_no_sample_size_means_all_items():
    assert BuildConfig(limit=None, per_level=None).limit is None and BuildConfig(limit=1, per_level=1).per_level == 1
