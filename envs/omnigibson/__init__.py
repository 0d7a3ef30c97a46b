"""BEHAVIOR-1K scenes in OmniGibson 1.1.1 behind the env protocol (docs/omnigibson.md).

Modules, one concept each: ``config`` (options, scene splits), ``convert`` (OmniGibson's arrays, poses,
intrinsics, segmentation and maps in our contracts: pure functions), ``sim`` (the thin boundary: the
only module that imports ``omnigibson``), ``scene`` (one loaded scene in our terms), ``topdown``
(ground-truth maps), ``task`` (episodes), ``route`` (exploration route), ``env``
(``OmniGibsonEnv``), ``material`` (GST material), ``family`` (``OmniGibsonFamily``, registered as
``omnigibson``). Importing this package does not import OmniGibson.
"""

from .config import SCENES, SPLITS, OmniGibsonConfig

__all__ = ["SCENES", "SPLITS", "OmniGibsonConfig"]
