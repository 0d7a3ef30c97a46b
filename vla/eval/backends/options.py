"""``ray.*``: where and how ``eval.backend=ray`` (and ``vla-gst generate backend=ray``) run.

Plain data, no Ray import: the config layer reads the defaults from here (``ray_schema``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from vla_common.strict import from_dict

# driver environment variables the workers get too (rendering, LIBERO's config, the code's path)
FORWARDED_ENV = ("MUJOCO_GL", "PYOPENGL_PLATFORM", "LIBERO_CONFIG_PATH", "PYTHONPATH", "OMP_NUM_THREADS")


@dataclass
class RayOptions:
    # None: start a Ray instance on this machine (and stop it at the end); "auto": the cluster this
    # machine belongs to (`ray start` ran here); "HOST:6379" a head's GCS; "ray://HOST:10001" Ray Client
    address: str | None = None
    num_cpus: float = 1.0  # per worker (one worker = one process = one env at a time)
    num_gpus: float = 0.0  # per worker: a policy that runs inside the workers on a GPU
    resources: dict[str, float] = field(default_factory=dict)  # custom resources per worker, e.g. {sim: 1}
    retries: int = 1  # a lost worker's episode (node gone, process killed, segfault) runs again this often, then fails
    local_cpus: int = 0  # address=None: CPUs the local instance offers (0: the machine's)
    forward_env: list[str] = field(default_factory=lambda: list(FORWARDED_ENV))  # driver env vars the workers get
    runtime_env: dict[str, Any] = field(default_factory=dict)  # Ray runtime_env (working_dir, pip, env_vars, ...)
    # serve=true: the agent runs once, in a vla-serve actor (placed by serve_num_cpus/gpus), and every
    # worker is its client (agent=remote); large models on GPUs, simulators on CPU nodes
    serve: bool = False
    serve_num_cpus: float = 1.0
    serve_num_gpus: float = 0.0
    serve_options: dict[str, Any] = field(default_factory=dict)  # ServeConfig fields: max_batch, token, host, ...

    def __post_init__(self) -> None:
        if self.address is not None and not isinstance(self.address, str):
            raise ValueError(
                f"ray.address must be null, 'auto', 'HOST:PORT' or 'ray://HOST:PORT', got {self.address!r}"
            )
        if float(self.num_cpus) < 0 or float(self.num_gpus) < 0 or float(self.serve_num_gpus) < 0:
            raise ValueError("ray.num_cpus, ray.num_gpus and ray.serve_num_gpus must be >= 0")
        if float(self.num_cpus) == 0 and float(self.num_gpus) == 0 and not self.resources:
            raise ValueError("ray.num_cpus=0 with no GPUs or resources would place unlimited workers on one node")
        if int(self.retries) < 0:
            raise ValueError(f"ray.retries must be >= 0, got {self.retries}")
        if int(self.local_cpus) < 0:
            raise ValueError(f"ray.local_cpus must be >= 0, got {self.local_cpus}")
        bad = {k: v for k, v in dict(self.resources).items() if not isinstance(v, (int, float)) or v < 0}
        if bad:
            raise ValueError(f"ray.resources must map names to amounts >= 0, got {bad}")

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "RayOptions":
        return from_dict(cls, d, "ray")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
