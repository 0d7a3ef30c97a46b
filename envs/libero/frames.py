"""Rendering only the observations something reads (``LiberoEnv.render_next``, :class:`envs.base.RendersOnDemand`).

A rendered LIBERO step spends most of its time in the software renderer (docs/BENCHMARKS.md, "What a
LIBERO step costs"), yet a policy that plays a chunk of 8 actions open loop reads one observation in
8, and a scripted expert reads none. The rollout loop knows when the next observation will be read
and says so before each step; a step whose observation nobody reads skips the camera passes.

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
    reset builds new observables)."""

    def __init__(self) -> None:
        self.open = True

    def install(self, robosuite_env: Any) -> None:
        """Wraps every image observable's sensor once (idempotent)."""
        self._env = robosuite_env
        for observable in robosuite_env._observables.values():
            sensor = observable._sensor
            if observable.modality != "image" or getattr(sensor, "_frame_gate", None) is self:
                continue
            observable._sensor = self._gated(sensor)

    def _activate(self) -> None:
        """Makes this env's GL context current: robosuite renders into whichever is, and another env of the
        process (its reset frees a context, which leaves none current) may have changed it."""
        self._env.sim._render_context_offscreen.gl_ctx.make_current()

    def _gated(self, sensor: Any) -> Any:
        def gated(obs_cache: dict) -> Any:
            if not self.open:
                return _SKIPPED
            self._activate()
            return sensor(obs_cache)

        gated.__modality__ = sensor.__modality__  # robosuite reads the modality off the sensor
        gated._frame_gate, gated._wrapped = self, sensor
        return gated
