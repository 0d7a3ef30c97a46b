#!/usr/bin/env bash
# GPU readiness check (docs/BENCHMARKS.md "GPU"): one script, at most ~8 minutes on an H200.
# Builds the Qwen2.5-VL-3B and -7B architectures with random weights in bf16 and prints a table of
# training-step throughput (tokens/s, MFU), single-step action latency at batch 1 and 16, chunked
# actions/s and peak memory. Run from the repository root on the GPU machine:
#   bash scripts/gpu_check.sh            # writes $OUT/gpu_check.json when OUT is set, else ./gpu_check.json
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
if [ ! -x "$PY" ]; then
  python3 -m venv .venv && .venv/bin/pip install -q -r requirements.lock && .venv/bin/pip install -q --no-deps -e .
  PY=.venv/bin/python
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
OUT_FILE="${OUT:-.}/gpu_check.json"
timeout 480 "$PY" scripts/gpu_bench.py --out "$OUT_FILE"
"$PY" - "$OUT_FILE" <<'PYEOF'
import json, sys
rows = json.load(open(sys.argv[1]))
print("| model | params (B) | train tokens/s | MFU | train peak (GiB) | latency b1 (ms) | latency b16 (ms) | actions/s b16 | chunk-8 actions/s | peak (GiB) |")
print("|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['model']} | {r['params_b']:.2f} | {r['train_tokens_per_s']:.0f} | {100*r['mfu']:.1f} % | {r['train_peak_gib']:.1f} | "
          f"{1000*r['latency_b1_s']:.1f} | {1000*r['latency_b16_s']:.1f} | {r['actions_per_s_b16']:.0f} | {r['chunk8_actions_per_s_b1']:.0f} | {r['peak_gib']:.1f} |")
PYEOF
