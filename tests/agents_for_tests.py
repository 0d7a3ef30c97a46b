"""Misbehaving agents for testing the loop's error handling (the loop is under test, not them)."""

from __future__ import annotations

import faulthandler
import os
import signal
import time

import numpy as np

from vla.agents.random import RandomAgent


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
            if self.trial == self.always:
                os.kill(os.getpid(), signal.SIGSEGV)
            if self.trial == self.once and not os.path.exists(self.marker):
                open(self.marker, "w").close()
                os.kill(os.getpid(), signal.SIGSEGV)
        return super().act(observation)
