"""Embedded procedural MuJoCo apartments: object navigation and GST question material (docs/HOUSE.md).

Modules, one concept each: ``config`` (options, seed splits), ``catalog`` (furniture and object
kinds), ``meshes`` (LIBERO meshes, simplified), ``spec`` (what an apartment is: ``HouseSpec``),
``generator`` (seeded apartments: ``layout`` the floor plan, ``furnish`` furniture and objects),
``mjcf`` (the MuJoCo model), ``navgrid`` (navigable grid, planner), ``agent`` (kinematic base and
camera; path following is ``envs.control``), ``render`` (offscreen views), ``scene`` (one loaded apartment),
``topdown`` (GT maps), ``exploration`` (coverage route, clips), ``task`` (episodes, success),
``expert`` (scripted policy), ``env`` (``HouseEnv``), ``family`` (``HouseFamily``, registered as
``house``). Importing this package does not import MuJoCo.
"""

from .config import SPLITS, HouseConfig

__all__ = ["SPLITS", "HouseConfig"]
