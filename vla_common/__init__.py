"""Below every other package (docs/ARCHITECTURE.md §2): config dataclasses read strictly from plain data
(:mod:`vla_common.strict`) and JSON documents written whole or not at all (:mod:`vla_common.atomic`).
It imports nothing of ours, so ``spatial_memory``, ``envs`` and ``vla`` may all import it."""
