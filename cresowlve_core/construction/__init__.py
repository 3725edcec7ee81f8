"""The construction pipeline (paper §3.1-3.2, App. B): raw ChGK packs -> a bilingual, annotated,
human-validated benchmark, on the stage runtime. See ``docs/construction.md``.

Modules: :mod:`.collect` (step 1), :mod:`.precheck` and :mod:`.llm_steps` (filters, translation,
annotations; one ``map_with_resume`` call each), :mod:`.parsers` (pure parsers of model output),
:mod:`.domains` (consolidation into the 34 groups), :mod:`.review` (human validation and the
agreement re-annotation), :mod:`.agreement` (Fleiss' kappa, Gwet's AC1), :mod:`.export` (published
schema, full export, data card), :mod:`.build` (the whole build, notebook sections).
"""
