"""``libero_mem``: LIBERO tasks whose success needs what was seen earlier (docs/LIBERO.md, "A memory suite").

The BDDL files are built by :mod:`.tasks` and live in ``bddl/`` beside it. :func:`register` adds
the suite to LIBERO's own benchmark registry (``libero.libero.benchmark``), as a ``Benchmark``
subclass whose tasks point at those files; LIBERO's ``ControlEnv`` then builds each task from its
BDDL file exactly as it builds the official ones. The suite has no official init states: use
``env.init_states=sampled``.
"""

from __future__ import annotations

SUITE = "libero_mem"
NO_OFFICIAL_STATES = (
    f"{SUITE} has no official init states (LIBERO ships none for it): use env.init_states=sampled "
    "(trial k = a placement drawn from the task's BDDL regions, seeded by k)"
)

SAMPLED_ONLY = (SUITE,)  # suites without official init states


def check_init_states(suite: str, init_states: str) -> str:
    """A suite without official init states refuses ``official`` (LIBERO has no files for it)."""
    if init_states == "official" and suite in SAMPLED_ONLY:
        raise ValueError(NO_OFFICIAL_STATES)
    return init_states


def register():
    """Register the suite with LIBERO's benchmark registry (idempotent); returns the class.
    Call after :func:`envs.libero.assets.prepare_libero` (it imports libero)."""
    from libero.libero import benchmark as lb

    if SUITE in lb.BENCHMARK_MAPPING:
        return lb.BENCHMARK_MAPPING[SUITE]
    from .tasks import BDDL_DIR, TASKS

    class LIBERO_MEM(lb.Benchmark):
        """The memory suite as a LIBERO benchmark: its tasks' BDDL files are the project's."""

        def __init__(self, task_order_index: int = 0):
            super().__init__(task_order_index=task_order_index)
            self.name = SUITE
            self.tasks = [
                lb.Task(
                    name=t.name,
                    language=t.language,
                    problem="Libero",
                    problem_folder=SUITE,
                    bddl_file=f"{t.name}.bddl",
                    init_states_file="",
                )
                for t in TASKS
            ]
            self.n_tasks = len(self.tasks)

        def get_task_bddl_file_path(self, i: int) -> str:
            return str(BDDL_DIR / self.tasks[i].bddl_file)

        def get_task_init_states(self, i: int):
            raise ValueError(NO_OFFICIAL_STATES)

    lb.register_benchmark(LIBERO_MEM)
    return LIBERO_MEM
