# One command each: `make demo` runs the main job, `make test` runs the tests.
# Both create the environment first (idempotent: a second `make setup` does nothing).
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.setup-done
export MUJOCO_GL ?= egl
export PYOPENGL_PLATFORM ?= egl

.PHONY: setup demo test test-slow bench check-assets clean

setup: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.lock 2>&1 | grep -v "^WARNING: Location" || true
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e . 2>&1 | grep -v "^WARNING: Location" || true
	$(PY) -m pip check | grep -v "^WARNING" 
	$(PY) -m envs.libero.assets
	@touch $@

demo: setup
	$(PY) -m vla.demo

test: setup
	$(PY) -m pytest -q

test-slow: setup
	$(PY) -m pytest -q -m slow

check-assets: setup
	$(PY) -m envs.libero.assets --full

clean:
	rm -rf $(VENV) .pytest_cache
