"""CresOWLve research environment: build, run and analyse creative problem-solving benchmarks."""

from cresowlve_core.lazy import defer_rfc3987_syntax

defer_rfc3987_syntax()  # 2 s less in every report kernel and test process (see lazy.py)

from cresowlve_core.items import ChgkQuestion, Item, ItemView, Lang  # noqa: E402

__all__ = ["ChgkQuestion", "Item", "ItemView", "Lang"]
__version__ = "0.1.0"
