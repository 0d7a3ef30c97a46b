"""Serving: one agent or policy behind a websocket for many simulators, and live map queries.

``vla-serve agent=memory port=8765`` hosts it (:class:`PolicyServer`), :class:`PolicyClient` talks
to it (``agent=remote`` in ``vla-rollout``; ``vla-query`` on the command line), the live page is
on the same port. Protocol, concurrency model and security: docs/SERVING.md. The client and the
wire format live in :mod:`vla.wire` (below the agents, which speak them); their names are here too.
"""

from vla.wire.client import ConnectionRejected, PolicyClient, ServerError, SessionLost

from .policy import AgentSessions, BatchModel, BatchPolicy, ModelSessions, make_batch_policy
from .server import PolicyServer, ServeConfig

__all__ = [
    "AgentSessions",
    "BatchModel",
    "BatchPolicy",
    "ConnectionRejected",
    "ModelSessions",
    "PolicyClient",
    "PolicyServer",
    "ServeConfig",
    "ServerError",
    "SessionLost",
    "make_batch_policy",
]
