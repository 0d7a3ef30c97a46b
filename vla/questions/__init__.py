"""The project's questions, below everything that asks or learns from them: GST-Bench's (docs/GST.md;
these modules) and the spatial-perception questions of VST-P's forms (``perception/``, docs/SPATIAL.md).

Modules: ``subtasks`` (the 12 subtasks: codes, competences, answer types, metrics), ``question``
(a question, what an agent is given, how questions travel), ``answers`` (answer spaces, typed answers
<-> text, the uniform random answer) and ``answering`` (answers from a spatial memory: the memory
agent's). The agents answer with them and the data reads them as training samples; the benchmark
harness that generates, asks and scores them is :mod:`vla.gst` (``vla-gst``).
"""
