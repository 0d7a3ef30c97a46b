"""What crosses the socket, below the agents that speak it and the server that answers.

``codec``: the wire format (msgpack with numpy arrays as plain maps, never pickle; JSON for browsers;
openpi's msgpack-numpy). ``client``: :class:`~vla.wire.client.PolicyClient`, the typed, reconnecting
client of a ``vla-serve`` server (``agent=remote``; ``from vla.serve import PolicyClient`` too).
The server itself is :mod:`vla.serve` (docs/SERVING.md).
"""
