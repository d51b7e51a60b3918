# Two commands do all the set-up on a fresh machine (Python >= 3.10 with venv):
#   make demo   creates .venv, installs fastkds, runs `fastkds demo` (1,000,000 points)
#   make test   the same set-up where needed, then the whole test suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test bench lint format install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/fastkds demo $(ARGS)

test: $(STAMP)
	$(BIN)/python -m pytest tests $(ARGS)

bench: $(STAMP)
	$(BIN)/python -m pytest bench --benchmark-only $(ARGS)

lint: $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[lint]"
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# rewrite the code in the layout `make lint` checks
format: $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[lint]"
	$(BIN)/ruff format .

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .benchmarks
