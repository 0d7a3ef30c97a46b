#!/bin/bash
# Merge the shards of scripts/slurm/libero_eval.sbatch, one suite at a time: OUT/<suite>/ gets the
# suite's episodes.jsonl and summary.json, after vla-merge has checked that every planned episode is
# there exactly once (it names the missing or duplicated (task, trial) pairs otherwise; resubmit
# those array tasks and merge again). Usable as an sbatch job or directly.
#SBATCH --job-name=libero-merge
#SBATCH --output=%x-%j.out
set -uo pipefail
if [ $# -ne 1 ]; then echo "usage: $0 OUT" >&2; exit 2; fi
OUT=$1
status=0
for SUITE in libero_spatial libero_object libero_goal libero_10; do
  "${VLA_BIN:-.venv/bin}/vla-merge" "out=$OUT/$SUITE" "shards=[$OUT/$SUITE/shard_*]" || status=1
done
exit $status
