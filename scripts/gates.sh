#!/usr/bin/env bash
# The project's gates, in order, each timed: lint and types (Python), format, lints and tests
# (Rust), then pytest. `scripts/gates.sh` runs them all (the README's `make test`, so CI);
# `scripts/gates.sh --quick` skips the tiers that need root or start Spark (`make check`). The full
# run lists its 15 slowest tests, so what makes CI long shows in its log.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
[ "${1:-}" = "--quick" ] && quick=1

timings=()
gate() {
  local name=$1
  shift
  local t0=$SECONDS
  echo "== $name: $*"
  "$@"
  timings+=("$(printf '%-14s %4d s' "$name" $((SECONDS - t0)))")
}

gate ruff .venv/bin/ruff check src tests benchmarks scripts examples
gate ruff-format .venv/bin/ruff format --check src tests benchmarks scripts examples
gate mypy .venv/bin/mypy
if command -v cargo >/dev/null 2>&1; then
  gate cargo-fmt cargo fmt --all --check
  gate clippy cargo clippy --workspace --all-targets -q -- -D warnings
  gate cargo-test cargo test --workspace -q
else
  echo "gates: cargo not found; the Rust gates cannot run" >&2
  exit 1
fi
if [ $quick -eq 1 ]; then
  gate pytest .venv/bin/python -m pytest -q -m "not root and not spark"
else
  gate pytest .venv/bin/python -m pytest -q --durations=15
fi
echo "== gates passed"
printf '%s\n' "${timings[@]}"
