"""Ground navigation shared by every env family whose agent is a base moving on a floor grid (the
apartments of ``envs/house``, the BEHAVIOR-1K scenes of ``envs/omnigibson``).

Modules, one concept each: ``navgrid`` (the navigable grid, segment tests, shortest paths),
``agent`` (the kinematic base and the camera it carries), ``task`` (ObjectNav episodes: goal
cells, ``make_episode``), ``expert`` (the scripted expert on the scene truth), ``draw`` (the route
overlay on a top-down map), ``config`` (the options every such env shares, checked once), ``env``
(``GroundNavEnv``: the env core a family subclasses). A family keeps only what is its own: how its
scenes are made or loaded, rendered and mapped, which objects may be targets, its exploration
route. Importing this package imports nothing else.
"""
