"""Spatial-perception question sets from scene truth (VST-P's question forms, docs/SPATIAL.md).

``tasks``: the task types, answer strings and scoring; ``questions``: the questions about rendered
views. Generating sets (``vla-data spatial``: scenes, shards, resume, Ray) is
:mod:`vla.data.spatial_generate`; a trained policy's answers and the trivial baseline, scored per task
type, :mod:`vla.data.spatial_eval`; the training source, :mod:`vla.data.spatial_qa`.
"""
