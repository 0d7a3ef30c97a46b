"""Transforms of observations into policy inputs, shared by training, ``act()`` and the server.

``memory``: the spatial memory as an input (:class:`~vla.transforms.memory.MemoryInputs`).
``memory_entries``: its entries on disk, the one identity and format every memory cache keeps them in.
"""
