"""Transforms of observations into policy inputs, shared by training, ``act()`` and the server.

``map_inputs``: the spatial memory as the policy's input (:class:`~vla.transforms.map_inputs.MemoryInputs`).
``frame_memory``: earlier frames as the policy's input, the implicit-memory baseline beside the map.
``entry_format``: those entries on disk, the one identity and format every memory cache keeps them in.
"""
