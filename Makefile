# The two commands a new user needs (both install what is missing first):
#   make demo   -- runs experiments/quickstart.toml on real Spark and writes a report
#   make test   -- runs the test suite (unit, simulation, root integration)
.PHONY: setup demo test lint clean
setup:
	@scripts/setup.sh
demo: setup
	.venv/bin/shufflelab demo
test: setup
	.venv/bin/python -m pytest -q
lint: setup
	.venv/bin/ruff check src tests benchmarks
	.venv/bin/ruff format --check src tests benchmarks
	.venv/bin/mypy
clean:
	.venv/bin/shufflelab clean
