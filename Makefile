# The two commands a new user needs (both install what is missing first):
#   make demo   -- runs experiments/quickstart.toml on real Spark and writes a report
#   make test   -- runs every gate: ruff, mypy, cargo fmt/clippy/test, then the test suite
#                  (unit, simulation, switch, root integration with real Spark)
#   make check  -- the same gates with only the tests that need neither root nor Spark
#   make cycles -- no import cycle between shufflelab's modules, and ndp/switch/mapreduce and the
#                  backends reach each other only through emulate/protocols.py (also part of
#                  make check/test)
.PHONY: setup demo test check lint cycles clean
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
cycles: setup
	.venv/bin/python -m pytest -q tests/unit/test_import_cycles.py
clean:
	.venv/bin/shufflelab clean
