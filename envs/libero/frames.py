"""Rendering only the observations something reads (``LiberoEnv.render_next``, :class:`envs.base.RendersOnDemand`).

A rendered LIBERO step spends most of its time in the software renderer (docs/BENCHMARKS.md, "What a
LIBERO step costs"), yet a policy that plays a chunk of 8 actions open loop reads one observation in
8, a scripted expert reads none, and a policy whose memory fuses one camera reads that one at every
step and the others one in 8. The rollout loop knows which cameras the next observation will be read
of and says so before each step; a step skips the passes of every camera nobody reads.

The frames that are rendered must be the very frames rendered before, bit for bit. robosuite samples
an observable inside the controller's substeps, on a timer each observable keeps (``Observable.update``:
with no delay, at the first substep of a control step, and the phase can slip by a substep as the
float timer accumulates). Switching the camera observables off (``set_enabled(False)``, as the settling
steps do) stops and resets those timers, so the frames after it could be taken at another substep. The
gate instead leaves every observable and its timer as it is and replaces only what a camera sensor
computes while the gate is closed: the timers run as before, and when the gate is open the sensor runs
at the substep it always ran at. A closed step's camera values are placeholders that the env never
returns (its observation has no frames).
"""

from __future__ import annotations

from typing import Any

import numpy as np

_SKIPPED = np.zeros(1, dtype=np.uint8)  # what a gated camera sensor yields while closed (never returned)


class FrameGate:
    """Opens and closes the camera sensors of one robosuite env (re-installed after every reset: a hard
    reset builds new observables). ``open``: True (every camera), False (none) or the set of robosuite
    camera names whose sensors run (RGB, depth and masks of a camera open and close together)."""

    def __init__(self) -> None:
        self.open: bool | frozenset[str] = True

    def install(self, robosuite_env: Any) -> None:
        """Wraps every image observable's sensor once (idempotent)."""
        self._env = robosuite_env
        for observable in robosuite_env._observables.values():
            sensor = observable._sensor
            if observable.modality != "image" or getattr(sensor, "_frame_gate", None) is self:
                continue
            camera = next((c for c in robosuite_env.camera_names if observable.name.startswith(f"{c}_")), None)
            observable._sensor = self._gated(sensor, camera)

    def _activate(self) -> None:
        """Makes this env's GL context current: robosuite renders into whichever is, and another env of the
        process (its reset frees a context, which leaves none current) may have changed it."""
        self._env.sim._render_context_offscreen.gl_ctx.make_current()

    def renders(self, camera: str | None) -> bool:
        """Whether the sensors of robosuite camera ``camera`` run now (one of no known camera: when any does)."""
        if isinstance(self.open, bool):
            return self.open
        return bool(self.open) if camera is None else camera in self.open

    def _gated(self, sensor: Any, camera: str | None) -> Any:
        def gated(obs_cache: dict) -> Any:
            if not self.renders(camera):
                return _SKIPPED
            self._activate()
            return sensor(obs_cache)

        gated.__modality__ = sensor.__modality__  # robosuite reads the modality off the sensor
        gated._frame_gate, gated._wrapped = self, sensor
        return gated
