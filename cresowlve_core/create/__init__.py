"""CREATE — "Testing LLMs for Associative Creativity" (Wadhwa et al., arXiv:2603.09970).

Modules, named after the paper's concepts (user documentation: ``docs/create.md``):

* :mod:`~cresowlve_core.create.queries` — the shipped queries and Algorithm 1 (query construction);
* :mod:`~cresowlve_core.sources.kg` — the Wikidata subset the builder samples from;
* :mod:`~cresowlve_core.create.paths` — parsing answers into paths; structural validity;
* :mod:`~cresowlve_core.create.judges` — specificity and factuality judges, path strength;
* :mod:`~cresowlve_core.create.distance` — path text, embeddings, the annealed distance;
* :mod:`~cresowlve_core.create.utility` — creative utility, patience curves, distinctiveness;
* :mod:`~cresowlve_core.create.scored` — scored path sets; the authors' recorded judgments;
* :mod:`~cresowlve_core.create.records` — the pydantic records of a run directory;
* :mod:`~cresowlve_core.create.generate` — the generation stage (``cresowlve create generate``);
* :mod:`~cresowlve_core.create.score` — the scoring stage (``cresowlve create score``), your runs;
* :mod:`~cresowlve_core.create.report` — leaderboard tables and altair charts.

Nothing heavy is imported here: the embedding model loads only when distances are needed.
"""
