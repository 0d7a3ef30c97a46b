"""``vla-train`` across the nodes of a Ray cluster: torchrun on Ray nodes.

    python -m vla.train.ray_launch --nodes 4 --gpus-per-node 8 --address auto -- \\
        model=vst_3b train.strategy=fsdp data.paths=[/shared/demos] out=/shared/runs/t

Ray only places and starts the processes: a placement group with one bundle per node
(``STRICT_SPREAD``: every bundle on another node, each with ``--gpus-per-node`` GPUs and
``--cpus-per-node`` CPUs), one Ray task per bundle that runs ``torchrun --nnodes=N
--node-rank=i --nproc-per-node=G --master-addr=<node 0> --master-port=P -m vla.train.cli ...``.
From there it is the same launch as plain torchrun or SLURM (docs/POLICY.md): the training loop
owns the process group, the batches, the checkpoints and the exact resume. ``out`` must be on a
filesystem every node mounts (rank 0 writes the checkpoints; every rank reads them on resume).
Run the same command again to resume. If the driver dies, Ray ends the tasks and the torchrun
processes die with them.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def _node_address() -> tuple[str, int]:
    """This node's address and a free port on it (run on node 0: the rendezvous)."""
    import socket

    import ray

    with socket.socket() as s:
        s.bind(("", 0))
        port = s.getsockname()[1]
    return ray.util.get_node_ip_address(), port


def _torchrun(rank: int, nodes: int, nproc: int, master: str, port: int, args: list[str]) -> int:
    """One node's torchrun (a Ray task); its processes die with this worker."""
    import ctypes
    import signal
    import subprocess

    def die_with_parent() -> None:
        try:
            ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except OSError:
            pass

    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nnodes={nodes}",
        f"--node-rank={rank}",
        f"--nproc-per-node={nproc}",
        f"--master-addr={master}",
        f"--master-port={port}",
        "-m",
        "vla.train.cli",
        *args,
    ]
    return subprocess.run(cmd, preexec_fn=die_with_parent).returncode


def launch(
    args: list[str],
    nodes: int,
    nproc: int,
    gpus_per_node: float = 0.0,
    cpus_per_node: float = 1.0,
    address: str | None = None,
    timeout_s: float = 600.0,
) -> list[int]:
    """Run ``vla-train args`` on ``nodes`` Ray nodes with ``nproc`` processes each; the exit codes."""
    from vla.eval.backends.options import RayOptions
    from vla.eval.backends.ray_backend import connected

    if nodes < 1 or nproc < 1:
        raise ValueError(f"--nodes and --nproc-per-node must be >= 1, got {nodes} and {nproc}")
    with connected(RayOptions(address=address)) as ray:
        from ray.util.placement_group import placement_group, remove_placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        bundle: dict[str, Any] = {"CPU": float(cpus_per_node)}
        if gpus_per_node:
            bundle["GPU"] = float(gpus_per_node)
        pg = placement_group([dict(bundle) for _ in range(nodes)], strategy="STRICT_SPREAD")
        ready, _ = ray.wait([pg.ready()], timeout=timeout_s)
        if not ready:
            remove_placement_group(pg)
            raise ValueError(
                f"the cluster has no {nodes} distinct nodes with {bundle} free each "
                f"(cluster: {ray.cluster_resources()}); waited {timeout_s:.0f} s"
            )
        try:

            def on(i: int):
                return PlacementGroupSchedulingStrategy(placement_group=pg, placement_group_bundle_index=i)

            master, port = ray.get(ray.remote(_node_address).options(num_cpus=0, scheduling_strategy=on(0)).remote())
            task = ray.remote(_torchrun)
            refs = [
                task.options(num_cpus=bundle["CPU"], num_gpus=bundle.get("GPU", 0), scheduling_strategy=on(i)).remote(
                    i, nodes, nproc, master, port, list(args)
                )
                for i in range(nodes)
            ]
            return ray.get(refs)
        finally:
            remove_placement_group(pg)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ours, train_args = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    ap = argparse.ArgumentParser(prog="python -m vla.train.ray_launch", description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, required=True)
    ap.add_argument("--nproc-per-node", type=int, default=0, help="processes per node (default: --gpus-per-node, or 1)")
    ap.add_argument("--gpus-per-node", type=float, default=0.0)
    ap.add_argument("--cpus-per-node", type=float, default=1.0)
    ap.add_argument("--address", default=None, help="auto, HOST:6379, ray://HOST:10001 (default: a local instance)")
    ap.add_argument("--timeout-s", type=float, default=600.0, help="how long to wait for the nodes")
    opts = ap.parse_args(ours)
    nproc = opts.nproc_per_node or int(opts.gpus_per_node) or 1
    try:
        codes = launch(
            train_args, opts.nodes, nproc, opts.gpus_per_node, opts.cpus_per_node, opts.address, opts.timeout_s
        )
    except ValueError as exc:
        print(f"ray_launch: error: {exc}", file=sys.stderr)
        return 2
    bad = [(i, c) for i, c in enumerate(codes) if c != 0]
    if bad:
        print(f"ray_launch: torchrun failed on node(s) {bad} (node rank, exit code)", file=sys.stderr)
    return max(codes) if bad else 0


if __name__ == "__main__":
    sys.exit(main())
