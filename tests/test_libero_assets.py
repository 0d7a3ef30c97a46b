"""Offline LIBERO setup: config without prompts, assets verified against the manifest."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envs.libero import assets


def test_installed_assets_match_manifest():
    entries = assets.read_manifest()
    assert len(entries) == 585
    assert assets.verify_assets(assets.assets_dir()) >= 0  # raises on any mismatch


def _small_copy(tmp_path: Path, n: int = 5) -> tuple[Path, Path]:
    entries = assets.read_manifest()[:n]
    root = tmp_path / "assets"
    for e in entries:
        dst = root / e.path
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(assets.assets_dir() / e.path, dst)
    manifest = tmp_path / "manifest.tsv"
    manifest.write_text("".join(f"{e.sha1}\t{e.size}\t{e.path}\n" for e in entries))
    return root, manifest


def test_corrupted_asset_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("LIBERO_CONFIG_PATH", str(tmp_path / "cfg"))
    root, manifest = _small_copy(tmp_path)
    assert assets.verify_assets(root, full=True, manifest=manifest) == 5
    victim = sorted(root.rglob("*.*"))[0]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, different content
    victim.write_bytes(bytes(data))
    os.utime(victim, ns=(1, 1))  # force a re-hash even with the stamp cache
    with pytest.raises(assets.AssetError) as err:
        assets.verify_assets(root, manifest=manifest)
    assert str(victim.relative_to(root)) in str(err.value)
    assert "corrupted" in str(err.value)


def test_missing_and_truncated_assets_are_named(tmp_path, monkeypatch):
    monkeypatch.setenv("LIBERO_CONFIG_PATH", str(tmp_path / "cfg"))
    root, manifest = _small_copy(tmp_path)
    files = sorted(p for p in root.rglob("*") if p.is_file())
    files[0].unlink()
    files[1].write_bytes(files[1].read_bytes()[:-1])
    with pytest.raises(assets.AssetError) as err:
        assets.verify_assets(root, manifest=manifest)
    msg = str(err.value)
    assert f"missing: {files[0].relative_to(root)}" in msg
    assert str(files[1].relative_to(root)) in msg and "size" in msg


def test_libero_imports_without_prompting(tmp_path):
    """A fresh config directory: importing through our package must never read stdin."""
    code = "from envs.libero import suites; print(suites.benchmark('libero_object').n_tasks)"
    env = dict(os.environ, LIBERO_CONFIG_PATH=str(tmp_path / "fresh"))
    out = subprocess.run(
        [sys.executable, "-c", code], stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "10"
    assert (tmp_path / "fresh" / "config.yaml").exists()


def test_plain_import_libero_in_this_environment_does_not_prompt(tmp_path):
    """`import libero` as LIBERO's own scripts do it -- no LIBERO_CONFIG_PATH, no ~/.libero, stdin
    closed -- finds the project's config through the start-up hook and resolves LIBERO's paths."""
    assets.prepare_libero()
    code = (
        "import os, libero.libero as l; print(os.environ['LIBERO_CONFIG_PATH']); "
        "print(os.path.isdir(l.get_libero_path('bddl_files')))"
    )
    env = {k: v for k, v in os.environ.items() if k != "LIBERO_CONFIG_PATH"}
    env["HOME"] = str(tmp_path)  # no ~/.libero here
    out = subprocess.run(
        [sys.executable, "-c", code],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=tmp_path,  # not the repository: our package is not imported first
    )
    assert out.returncode == 0, out.stderr[-2000:]
    cfg_dir, isdir = out.stdout.strip().splitlines()[-2:]
    assert Path(cfg_dir, "config.yaml").exists() and isdir == "True"
