"""Misbehaving agents (and an env family that cannot build some tasks) for testing the loop's and the
evaluator's error handling (the loop is under test, not them)."""

from __future__ import annotations

import faulthandler
import os
import signal
import time

import numpy as np

from envs.libero.family import LiberoFamily
from vla.agents.random import RandomAgent

UNBUILDABLE: set[int] = set()  # task ids UnbuildableTaskFamily refuses to build (in this process)


class NanAgent(RandomAgent):
    """Sends a NaN action on the third step."""

    name = "nan"

    def reset(self, instruction, spec):
        super().reset(instruction, spec)
        self.t = 0

    def act(self, observation):
        self.t += 1
        a = super().act(observation)
        if self.t == 3:
            a[0] = np.nan
        return a


class WrongShapeAgent(RandomAgent):
    name = "wrong-shape"

    def act(self, observation):
        return np.zeros(3)


class CrashOnTrialAgent(RandomAgent):
    """Kills its own process with SIGSEGV (as a simulator segfault would) in episodes of trial 1."""

    name = "crash"

    def seed(self, seed):
        super().seed(seed)
        self.trial = seed[2] if isinstance(seed, tuple) else 0

    def act(self, observation):
        if self.trial == 1 and observation.step >= 2:
            faulthandler.disable()  # the crash is the test's point: no traceback dump in the test log
            os.kill(os.getpid(), signal.SIGSEGV)
        return super().act(observation)


class HangOnTrialAgent(RandomAgent):
    """Random actions, except that in trial ``trial`` its first act() writes ``<marker>.held`` and
    waits until the file ``marker`` exists: served, it holds that episode in flight for as long as a
    test needs (to kill the server)."""

    name = "hang-on-trial"

    def __init__(self, seed=0, marker: str = "", trial: int = 1):
        super().__init__(seed=seed)
        self.marker, self.hang_trial, self.trial = marker, int(trial), 0

    def seed(self, seed):
        super().seed(seed)
        self.trial = seed[2] if isinstance(seed, (tuple, list)) else 0

    def act(self, observation):
        if self.trial == self.hang_trial and not os.path.exists(self.marker):
            open(self.marker + ".held", "w").close()
            while not os.path.exists(self.marker):
                time.sleep(0.05)
        return super().act(observation)


class SlowRandomAgent(RandomAgent):
    """Random actions, slowly: gives a test time to kill the run mid-episode."""

    name = "slow-random"

    def act(self, observation):
        time.sleep(0.02)
        return super().act(observation)


class CrashingAgent(RandomAgent):
    """Kills its own process with SIGSEGV (as a lost node would) at step 2: in trial ``always`` every
    time, in trial ``once`` only the first time (``marker``: a file that remembers it across processes)."""

    name = "crashing"

    def __init__(self, seed=0, marker: str = "", always: int = 1, once: int = 2):
        super().__init__(seed)
        self.marker, self.always, self.once = marker, int(always), int(once)
        self.trial = 0

    def seed(self, seed):
        super().seed(seed)
        self.trial = seed[2] if isinstance(seed, tuple) else 0

    def act(self, observation):
        if observation.step >= 2:
            faulthandler.disable()  # the crash is the test's point: no traceback dump in the test log
            if self.trial == self.always:
                os.kill(os.getpid(), signal.SIGSEGV)
            if self.trial == self.once and not os.path.exists(self.marker):
                open(self.marker, "w").close()
                os.kill(os.getpid(), signal.SIGSEGV)
        return super().act(observation)


class UnbuildableTaskFamily(LiberoFamily):
    """LIBERO, except that the tasks in ``UNBUILDABLE`` cannot be built (as with missing assets)."""

    name = "libero_unbuildable"

    def make(self, cfg, task_id):
        if task_id in UNBUILDABLE:
            raise RuntimeError(f"cannot build task {task_id}: its assets are missing")
        return super().make(cfg, task_id)
