# One command each: `make demo` runs the main job, `make test` runs the tests.
# Both create the environment first (idempotent: a second `make setup` does nothing).
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
# pipefail: an install that fails (a full disk, a lost registry) stops the setup there, with pip's
# own error, instead of surfacing later as a missing package.
SHELL       := bash
.SHELLFLAGS := -eo pipefail -c
STAMP  := $(VENV)/.setup-done
export MUJOCO_GL ?= egl
export PYOPENGL_PLATFORM ?= egl

.PHONY: setup browser demo proof test test-slow check-docs lint bench check-assets clean

setup: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.lock 2>&1 | { grep -v "^WARNING: Location" || true; }
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e . 2>&1 | { grep -v "^WARNING: Location" || true; }
	$(PY) -m pip check 2>&1 | { grep -v "^WARNING" || true; }
	$(PY) -m envs.libero.assets
	@touch $@

demo: setup
	$(PY) -m vla.demo

# The smallest learned result, end to end (10 min 38 s on 2 idle cores, measured at 66ca57e): one expert
# demonstration on a LIBERO init state, the tiny policy over-fitted to it, replayed in closed loop from the
# same state (docs/POLICY.md, "Does the policy act as it was trained?"); exits non-zero if the replay fails.
# The named experiment replay_proof (configs/experiment/replay_proof.yaml, docs/experiments/README.md).
PROOF ?= runs/experiments/replay_proof
proof: setup
	$(VENV)/bin/vla-experiment replay_proof root=$(PROOF)

# The live-page test (tests/test_serve_rollout.py) drives Debian's headless Chromium. Install it
# where apt-get is available as root (CI's machine); elsewhere that one test skips, saying why.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    echo "make: installing Debian's chromium for the live-page test"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null 2>&1 \
	      || echo "make: could not install chromium: the live-page test will skip"; \
	  else echo "make: no chromium and no apt-get as root: the live-page test will skip"; fi; }

# The fast tier on TEST_WORKERS processes (pytest-xdist; whole files per worker, so a file's fixtures
# are built once), one torch/OpenMP thread each so that the workers do not oversubscribe the cores.
TEST_WORKERS ?= 2
test: setup browser
	OMP_NUM_THREADS=1 $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

test-slow: setup
	$(PY) -m pytest -q -m slow

# Every command of README.md and docs/*.md, run at tiny size (scripts/check_docs_commands.py; slow:
# see docs/BENCHMARKS.md for how long). The fast tier parses their arguments (tests/test_docs_commands.py).
check-docs: setup
	$(PY) scripts/check_docs_commands.py --run

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

check-assets: setup
	$(PY) -m envs.libero.assets --full

clean:
	rm -rf $(VENV) .pytest_cache
