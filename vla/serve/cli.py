"""``vla-serve`` (host an agent) and ``vla-query`` (ask a served agent's map) command lines.

    vla-serve agent=memory port=8765 [env=house] [host=0.0.0.0 token=...]
    vla-serve policy_path=runs/train/policy [device=cuda]   # the learned VLA (a memory policy brings its memory)
    vla-query --url ws://127.0.0.1:8765 "where is the black bowl?"
    vla-query --target bowl --what direction,distance
    vla-query --objects | --png map.png --level easy | --snapshot memory.npz | --health | --sessions

``vla-query`` prints JSON on stdout. Exit status: 0 answered, 1 the server said no (e.g. no such
object), 2 bad usage or no connection. The token may also come from ``$VLA_SERVE_TOKEN``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
from dataclasses import fields
from typing import Any

from .config import ServeOptions
from .server import ServeConfig

_SERVE_KEYS = {f.name for f in fields(ServeConfig)}  # the options that configure the server itself


def build_server(cfg: dict[str, Any]):
    """The server a composed ``serve`` config describes (not yet started)."""
    from .policy import make_batch_policy
    from .server import PolicyServer

    serve_cfg = ServeConfig.from_dict({k: v for k, v in cfg.items() if k in _SERVE_KEYS})
    spec = None
    if cfg.get("env"):
        from envs.registry import make_env

        env = make_env(cfg["env"], 0)
        try:
            spec = env.env_spec
        finally:
            env.close()
    if cfg.get("policy_path"):
        from .policy import load_batch_policy

        policy = load_batch_policy(
            str(cfg["policy_path"]), memory=cfg.get("memory"), device=str(cfg.get("device", "cpu"))
        )
    else:
        policy = make_batch_policy(cfg["agent"], memory=cfg.get("memory"))
    return PolicyServer(policy, serve_cfg, expected_spec=spec)


def serve_main(argv: list[str] | None = None) -> int:
    from vla.config import compose, groups

    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        print(f"agents: {', '.join(groups('agent'))}; env (optional): {', '.join(groups('env'))}")
        print("options: " + ", ".join(sorted(f.name for f in fields(ServeOptions))))
        print("every option with its default: vla-serve --cfg (ServeOptions, vla/serve/config.py)")
        return 0
    show = "--cfg" in argv
    argv = [a for a in argv if a != "--cfg"]
    try:
        cfg = compose("serve", argv)
        if show:
            print(json.dumps(cfg, indent=2))
            return 0
        logging.basicConfig(level=str(cfg.get("log_level", "info")).upper(), format="%(asctime)s %(name)s: %(message)s")
        logging.getLogger("websockets").setLevel(logging.WARNING)
        server = build_server(cfg)
    except ValueError as exc:
        print(f"vla-serve: error: {exc}", file=sys.stderr)
        return 2

    def ready(srv) -> None:
        meta, host, port = srv.metadata(), srv.cfg.host, srv.port
        batching = f"max {meta['batch']['max_batch']}, wait {srv.cfg.max_wait_ms} ms" if srv.cfg.batching else "off"
        print(
            f"vla-serve: agent {meta.get('agent')!r} listening on ws://{host}:{port} (live page http://{host}:{port}/"
            f"{'?token=...' if srv.cfg.token else ''}); batching {batching}; Ctrl-C stops",
            file=sys.stderr,
            flush=True,
        )
        if srv.cfg.insecure and not srv.cfg.token:
            print(
                "vla-serve: warning: insecure=true: anyone who can reach this port drives the policy",
                file=sys.stderr,
                flush=True,
            )

    try:
        server.run(ready)
    except OSError as exc:
        where = f"{server.cfg.host}:{server.cfg.port}"
        print(f"vla-serve: error: cannot listen on {where}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    return 0


def _size(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d+)x(\d+)", text)
    if not m:
        raise argparse.ArgumentTypeError(f"size must be WIDTHxHEIGHT, e.g. 640x512, got {text!r}")
    return int(m.group(1)), int(m.group(2))


def query_args(argv: list[str] | None = None) -> argparse.Namespace:
    """``vla-query``'s arguments, checked (usage errors exit with status 2, as argparse's do); nothing is asked."""
    ap = argparse.ArgumentParser(prog="vla-query", description="Ask a served agent's spatial memory (JSON out).")
    ap.add_argument("question", nargs="?", help='a question in words, e.g. "where is the black bowl?"')
    ap.add_argument("--url", default=os.environ.get("VLA_SERVE_URL", "ws://127.0.0.1:8765"))
    ap.add_argument("--token", default=os.environ.get("VLA_SERVE_TOKEN"))
    ap.add_argument("--session", default=None, help="session id (default: the most recently active one)")
    ap.add_argument("--target", help="an object id or category")
    ap.add_argument("--what", default=None, help="direction,distance,point,agent (default: all)")
    ap.add_argument("--objects", action="store_true", help="every object with direction and distance")
    ap.add_argument("--png", help="write the top-down map here")
    ap.add_argument("--level", default="medium", choices=("easy", "medium", "hard"))
    ap.add_argument("--size", type=_size, default=(640, 512), help="map size WIDTHxHEIGHT (default 640x512)")
    ap.add_argument("--frame", default="fit", choices=("fit", "ego"))
    ap.add_argument("--snapshot", help="write the memory (.npz, SpatialMemory.load reads it) here")
    ap.add_argument("--health", action="store_true")
    ap.add_argument("--sessions", action="store_true")
    ap.add_argument("--timeout", type=float, default=60.0)
    args = ap.parse_args(argv)
    if not (args.question or args.target or args.objects or args.png or args.snapshot or args.health or args.sessions):
        ap.error("ask a question, or give --target, --objects, --png, --snapshot, --health or --sessions")
    if args.question and args.target:
        ap.error("give a question or --target, not both")
    return args


def query_main(argv: list[str] | None = None) -> int:
    from vla.wire.client import PolicyClient, ServerError

    try:
        args = query_args(argv)
    except SystemExit as exc:  # a usage error (printed) or --help: the status
        return int(exc.code or 0)
    asks_map = args.question is not None and re.search(r"\bmap\b", args.question.lower()) is not None
    out: dict[str, Any] = {}
    frame = {"width": args.size[0], "height": args.size[1], "frame": args.frame}
    try:
        with PolicyClient(args.url, args.token, timeout_s=args.timeout, reconnect=False) as c:
            if args.health:
                out["health"] = c.health()
            if args.sessions:
                out["sessions"] = c.sessions()
            if args.objects:
                out["objects"] = c.objects(args.session, **frame).raw
            if args.target or (args.question and not asks_map):
                what = args.what.split(",") if args.what else None
                ans = c.query(
                    target=args.target,
                    question=None if args.target else args.question,
                    what=what,
                    session=args.session,
                    **frame,
                )
                out["answer"] = ans.raw
            if args.png or asks_map:
                path = args.png or "map.png"
                td = c.topdown(args.level, args.session, **frame)
                td.save(path)
                out["map"] = {"png": path, "level": args.level, "frame": td.frame, "frames": td.frames}
            if args.snapshot:
                n = len(c.snapshot(args.snapshot, args.session))
                out["snapshot"] = {"npz": args.snapshot, "bytes": n}
    except ServerError as exc:
        print(json.dumps({"error": {"code": exc.code, "message": exc.message}}))
        return 1
    except (OSError, ValueError) as exc:
        print(f"vla-query: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":  # python -m vla.serve.cli [query] ... (the console scripts without installing them)
    if sys.argv[1:2] == ["query"]:
        sys.exit(query_main(sys.argv[2:]))
    sys.exit(serve_main())
