"""LIBERO suites and their official evaluation settings (docs/LIBERO.md)."""

from __future__ import annotations

from functools import lru_cache

from ..base import TaskInfo
from .assets import prepare_libero
from .config import ENV_SEED  # noqa: F401  (LIBERO's env.seed(), once per task env)
from .config import SAMPLED_TRIALS
from .mem import SAMPLED_ONLY, check_init_states  # noqa: F401  (env.init_states of a suite)
from .mem import SUITE as MEM_SUITE

# max policy steps per episode (after the settling no-ops), as OpenVLA / openpi evaluate
MAX_STEPS = {
    "libero_spatial": 220,
    "libero_object": 280,
    "libero_goal": 300,
    "libero_10": 520,
    "libero_90": 400,
    MEM_SUITE: 500,  # the project's memory suite (envs/libero/mem/): two pick-and-places, and a drawer's close
}
SUITES = tuple(MAX_STEPS)
NOOP_ACTION = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0)
TRIALS_PER_TASK = 50  # the evaluation protocol's trials per task (eval.trials_per_task unset)
SEED = 7  # our RNGs (agents, python/numpy/torch in each worker), as OpenVLA's set_seed_everywhere(7)


def check_suite(suite: str) -> str:
    if suite not in MAX_STEPS:
        raise ValueError(f"unknown LIBERO suite {suite!r}; expected one of {list(SUITES)}")
    return suite


@lru_cache(maxsize=None)
def benchmark(suite: str):
    """The libero ``Benchmark`` object of a suite (imports libero after the offline setup)."""
    check_suite(suite)
    prepare_libero()
    from libero.libero import benchmark as lb

    if suite == MEM_SUITE:  # the project's own suite, registered with LIBERO's benchmark registry
        from .mem import register

        register()

    return lb.get_benchmark_dict()[suite]()


def task_infos(suite: str, max_steps: int | None = None) -> list[TaskInfo]:
    b = benchmark(suite)
    out = []
    for i in range(b.n_tasks):
        t = b.get_task(i)
        out.append(
            TaskInfo(
                task_id=i,
                name=t.name,
                instruction=t.language,
                max_steps=max_steps or MAX_STEPS[suite],
                num_trials=SAMPLED_TRIALS if suite in SAMPLED_ONLY else len(b.get_task_init_states(i)),
            )
        )
    return out


def check_task(suite: str, task_id: int) -> int:
    n = benchmark(suite).n_tasks
    if not isinstance(task_id, int) or not 0 <= task_id < n:
        raise ValueError(f"task id {task_id!r} out of range for {suite}: it has tasks 0..{n - 1}")
    return task_id
