"""Synthetic CresOWLve-style puzzles from a knowledge graph (paper App. D, and its future work).

Stages, one module each: :mod:`~.domains` and :mod:`~.notability` (what to sample),
:mod:`~.anchors` (1), :mod:`~.facts` and :mod:`~.candidates` (2), :mod:`~.verbalise` and
:mod:`~.answers` (3: verbalisation, leak check), :mod:`~.leap` (4: creative-leap filter),
:mod:`~.export` (5: review queue, items), :mod:`~.difficulty` (6: difficulty score);
:mod:`~.pipeline` runs them all (``run_synth``), :mod:`~.report` draws the report sections.
See ``docs/synthetic.md``.
"""
