"""Spatial-perception question sets from scene truth (VST-P's question forms, docs/SPATIAL.md).

``tasks``: the task types, answer strings and scoring; ``questions``: the questions about rendered
views; ``generate``: ``vla-data spatial`` (scenes, shards, resume, Ray); ``evaluate``: a trained
policy's answers and the trivial baseline, scored per task type.
"""
