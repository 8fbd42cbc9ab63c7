# Two entry points for a fresh machine (see README): `make run` and `make test`.
# The virtualenv is created once and refreshed when pyproject.toml or the constraints change.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup run test lint clean-venv

$(STAMP): pyproject.toml constraints-cpu.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --upgrade --quiet pip
	$(PY) -m pip install --quiet -c constraints-cpu.txt -e ".[dev]"
	touch $(STAMP)

setup: $(STAMP)

run: setup
	HF_HUB_OFFLINE=1 $(VENV)/bin/genenv run --preset tiny $(ARGS)

test: setup
	HF_HUB_OFFLINE=1 $(VENV)/bin/lint-imports
	HF_HUB_OFFLINE=1 $(PY) -m pytest $(PYTEST_ARGS)

clean-venv:
	rm -rf $(VENV)
