"""Stage 1: anchors, sampled by domain inside the notability band, with an English label.

Each domain's eligible members are shuffled with a seeded generator (the seed and the domain
name); :func:`~cresowlve_core.synthetic.candidates.build_candidates` then lets the domains take
turns, so a small run still covers every domain.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from cresowlve_core.sources.kg import KnowledgeSource
from cresowlve_core.synthetic.domains import Domain
from cresowlve_core.synthetic.notability import NotabilityBand


@dataclass(frozen=True)
class AnchorPool:
    """The eligible anchors of one domain, in sampling order, with the counts behind them."""

    domain: Domain
    n_members: int  # instances of the domain's types (after the description filter)
    n_labelled: int  # ... with an English label
    order: tuple[str, ...]  # ... inside the band, shuffled (seeded)


def anchor_pool(source: KnowledgeSource, domain: Domain, band: NotabilityBand, seed: int) -> AnchorPool:
    """Members of ``domain`` with an English label and notability inside ``band``, shuffled."""
    members = domain.members(source)
    labelled = [q for q in members if source.english_label(q)]
    eligible = [q for q in labelled if band.contains(source.notability(q))]
    random.Random(f"{seed}:anchors:{domain.name}").shuffle(eligible)
    return AnchorPool(domain, len(members), len(labelled), tuple(eligible))
