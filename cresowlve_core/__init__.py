"""CresOWLve research environment: build, run and analyse creative problem-solving benchmarks."""

from cresowlve_core.items import ChgkQuestion, Item, ItemView, Lang

__all__ = ["ChgkQuestion", "Item", "ItemView", "Lang"]
__version__ = "0.1.0"
