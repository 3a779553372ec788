# One task runner for planmode: the README and CI use these targets.
# Every target runs inside the project's virtual environment (.venv, made by `make setup`).
PY ?= .venv/bin/python

.PHONY: setup demo test slow lint format typecheck check bench mutation clean

setup:  ## create .venv with the dev extra and run the offline demo
	python3 -m venv .venv && .venv/bin/pip install -q -e '.[dev]' && .venv/bin/planmode demo

demo:  ## the offline demo (scripted model, SQLite, no API key)
	.venv/bin/planmode demo

test:  ## the normal suite (leaves out tests marked slow)
	$(PY) -m pytest -q

slow:  ## the long trials: fuzzing, crash and concurrency trials
	HYPOTHESIS_PROFILE=long $(PY) -m pytest -m slow -q

lint:  ## ruff: lint rules and format check
	$(PY) -m ruff check src tests bench notebooks
	$(PY) -m ruff format --check src tests bench

format:  ## ruff: rewrite the code into the project's format, fix what is auto-fixable
	$(PY) -m ruff format src tests bench
	$(PY) -m ruff check --fix src tests bench

typecheck:  ## mypy --strict on the package
	$(PY) -m mypy src

check: lint typecheck test  ## what CI checks

bench:  ## every benchmark with its baseline (needs the bench extra); writes bench/results and docs/benchmarks.md
	$(PY) -m bench

mutation:  ## mutation testing of the patch rules and the approval protocol (needs the mutation extra)
	$(PY) -m bench.mutation

clean:
	rm -rf .pytest_cache .mypy_cache .ruff_cache .hypothesis mutants build dist
