"""``vla-merge``: join the out dirs of a sharded evaluation into one, exactly.

    vla-merge out=runs/x shards=[runs/x_shard_0,runs/x_shard_1]       # or shards=[runs/x_shard_*]

Refuses (exit status 2, one line) when an episode of the plan is missing or recorded twice,
listing the (task, trial) pairs; otherwise writes ``out/episodes.jsonl``, the side logs and
``out/summary.json`` of the whole plan.
"""

from __future__ import annotations

import sys


def options(argv: list[str]) -> dict:
    """The composed ``merge`` config of ``argv``, checked; nothing is read or written (a bad one: ValueError)."""
    from vla.config import compose

    cfg = compose("merge", argv)
    if not cfg.get("out"):
        raise ValueError("vla-merge needs out=DIR")
    if not cfg.get("shards"):
        raise ValueError("vla-merge needs shards=[DIR, ...] (the out dirs of the shards)")
    return cfg


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        return 0 if argv else 2
    try:
        cfg = options(argv)
        from vla.eval.merge import merge

        summary = merge(cfg.get("shards") or [], cfg["out"], record=cfg.get("record"))
    except ValueError as exc:
        print(f"vla-merge: error: {exc}", file=sys.stderr)
        return 2
    rate = summary["success_rate"]
    print(
        f"{summary['suite']} · {summary['agent']}: {summary['episodes']} of {summary['planned']} planned episodes "
        f"from {len(summary['merged_from'])} dirs, {summary['successes']} successful"
        + (f" ({100 * rate:.1f}%)" if rate is not None else "")
        + (f", {summary['errors']} errors" if summary["errors"] else "")
        + f" -> {cfg['out']}/summary.json"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
