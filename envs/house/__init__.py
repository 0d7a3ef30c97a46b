"""Embedded procedural MuJoCo apartments: object navigation and GST question material (docs/HOUSE.md).

Modules, one concept each: ``config`` (options, seed splits), ``catalog`` (furniture and object
kinds), ``meshes`` (LIBERO meshes, simplified), ``spec`` (what an apartment is: ``HouseSpec``),
``generator`` (seeded apartments: ``layout`` the floor plan, ``furnish`` furniture and objects),
``mjcf`` (the MuJoCo model), ``render`` (offscreen views), ``scene`` (one loaded apartment),
``topdown`` (GT maps), ``exploration`` (coverage route, clips), ``task`` (which objects are
targets, goal cells by ray casting), ``env`` (``HouseEnv``), ``material`` (GST material), ``family``
(``HouseFamily``, registered as ``house``). The navigable grid, the kinematic base, episodes, the
expert and the env core are shared with OmniGibson: ``envs/ground_nav``. Importing this package
does not import MuJoCo.
"""

from .config import SPLITS, HouseConfig

__all__ = ["SPLITS", "HouseConfig"]
