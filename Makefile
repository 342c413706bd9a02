# The two commands a new user needs (both install what is missing first):
#   make demo   -- runs experiments/quickstart.toml on real Spark and writes a report
#   make test   -- runs every gate: ruff, mypy, cargo fmt/clippy/test, then the test suite
#                  (unit, simulation, switch, root integration with real Spark)
#   make check  -- the same gates with only the tests that need neither root nor Spark
.PHONY: setup demo test check lint clean
setup:
	@scripts/setup.sh
demo: setup
	.venv/bin/shufflelab demo
test: setup
	scripts/gates.sh
check: setup
	scripts/gates.sh --quick
lint: setup
	.venv/bin/ruff check src tests benchmarks scripts examples
	.venv/bin/ruff format --check src tests benchmarks scripts examples
	.venv/bin/mypy
clean:
	.venv/bin/shufflelab clean
