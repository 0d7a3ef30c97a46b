"""``vla-rollout``: closed-loop evaluation from Hydra overrides.

    vla-rollout env=libero env.suite=libero_spatial agent=scripted \\
        eval.tasks=[0,1] eval.trials_per_task=5 eval.workers=2 eval.videos=failures out=runs/x
    vla-rollout ... eval.backend=ray ray.address=auto out=runs/x          # on a Ray cluster (docs/SCALE.md)
    vla-rollout ... eval.shard=3/16 out=runs/x/shard_3                    # one of 16 shards; vla-merge joins them

Writes ``out/episodes.jsonl`` (one line per finished episode), ``out/summary.json`` and
``out/videos/*.mp4``. Run the same command again to resume: finished episodes are skipped, and
episodes that infrastructure errors ended (``out/infra_errors.jsonl``: the policy server gone, an
env that could not be built, a worker lost twice; never counted as failures) run again.
"""

from __future__ import annotations

import json
import sys

USAGE = (
    __doc__
    + """
Config groups (choose with group=name, set fields with group.key=value):
  env:   {env}
  agent: {agent}
  eval:  {eval}
Show the composed config without running: vla-rollout --cfg [overrides...]
"""
)


def spec_from_config(cfg: dict):
    from vla_common.strict import check_keys, field_names
    from vla.config import SCHEMAS, check_config
    from vla.eval.evaluate import EvalSpec

    check_config(cfg)
    ev = dict(cfg["eval"])
    left_out = SCHEMAS[("eval", "default")][1]  # the EvalSpec fields set from elsewhere (out=, env=, ...)
    check_keys(ev, set(field_names(EvalSpec)) - set(left_out), "eval")
    from vla.gst.midepisode import gst_options

    extra = {"gst": cfg["gst"]} if cfg.get("gst") and gst_options(cfg["gst"])["enabled"] else {}
    from envs.perception import perception_profile

    profile = perception_profile(cfg.get("perception"))  # validated now, not in a worker
    rerun = cfg.get("rerun") if (cfg.get("rerun") or {}).get("enabled") else None
    if rerun is not None:
        from vla.rollout.rerun_view import RerunOptions, import_rerun

        RerunOptions.from_dict(rerun)
        try:
            import_rerun()
        except ImportError as exc:
            raise ValueError(str(exc)) from None
    ray = None
    if ev.get("backend") == "ray":
        from vla.eval.backends.options import RayOptions

        ray = RayOptions.from_dict(cfg.get("ray")).to_dict()  # validated here, not in a worker
    return EvalSpec(
        env=cfg["env"],
        agent=cfg["agent"],
        out=cfg["out"],
        record=cfg.get("record"),
        record_keep=cfg.get("record_keep") or "success",
        extra=extra,
        perception=None if profile.exact else profile.to_dict(),
        rerun=rerun,
        ray=ray,
        **ev,
    )


def main(argv: list[str] | None = None) -> int:
    from vla.config import check_config, compose, groups

    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in argv):
        print(
            USAGE.format(env=", ".join(groups("env")), agent=", ".join(groups("agent")), eval=", ".join(groups("eval")))
        )
        return 0
    show = "--cfg" in argv
    argv = [a for a in argv if a != "--cfg"]
    try:
        cfg = compose("rollout", argv)
        if show:
            check_config(cfg)
            print(json.dumps(cfg, indent=2))
            return 0
        from vla.eval.evaluate import evaluate

        summary = evaluate(spec_from_config(cfg), progress=bool(cfg.get("progress", True)))
    except ValueError as exc:
        print(f"vla-rollout: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("vla-rollout: interrupted; run the same command again to resume", file=sys.stderr)
        return 130
    rate = summary["success_rate"]
    print(
        f"{summary['suite']} · {summary['agent']}: {summary['successes']}/{summary['episodes']} successful"
        + (f" ({100 * rate:.1f}%)" if rate is not None else "")
        + (f", {summary['errors']} errors" if summary["errors"] else "")
        + f" -> {cfg['out']}/summary.json"
    )
    if summary.get("infra_errors"):
        first = summary["not_counted"][0]
        print(
            f"{summary['infra_errors']} episodes not counted: infrastructure errors (first: task {first['task_id']} "
            f"trial {first['trial']}: {first['error']}); run the same command again to retry them",
            file=sys.stderr,
        )
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
