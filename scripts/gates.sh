#!/usr/bin/env bash
# The project's gates, each timed. Two tiers:
#   1. side by side (one core each): the Python gates (ruff, ruff format, mypy, then part b of the
#      tests that need neither root nor Spark) and the Rust gates (cargo fmt, clippy, cargo test,
#      then part a of those tests; tests/conftest.py's --part splits them by file, each runs once);
#   2. alone, once tier 1 passed: the tests that need root or start Spark (real namespaces, real
#      Spark, the SSH stand-in hosts), whose timing-sensitive checks get the machine to themselves.
# `scripts/gates.sh` runs both (the README's `make test`, so CI); `scripts/gates.sh --quick` only
# tier 1 (`make check`). Every test runs in exactly one of the three pytest runs (the markers and
# --part split the suite). The full run lists its 15 slowest tests; both print each gate's time and the total.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
[ "${1:-}" = "--quick" ] && quick=1

start=$SECONDS
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# gate NAME COMMAND...: runs the command; its time goes to the summary. Returns its failure.
gate() {
  local name=$1
  shift
  local t0=$SECONDS
  echo "== $name: $*"
  if ! "$@"; then
    echo "== $name FAILED after $((SECONDS - t0)) s"
    return 1
  fi
  printf '%-14s %4d s\n' "$name" $((SECONDS - t0)) >>"$logs/times"
}

python_gates() {
  gate ruff .venv/bin/ruff check src tests benchmarks scripts examples &&
    gate ruff-format .venv/bin/ruff format --check src tests benchmarks scripts examples &&
    gate mypy .venv/bin/mypy &&
    gate pytest-unit-b .venv/bin/python -m pytest -q -m "not root and not spark" --part b
}

rust_gates() {
  if ! command -v cargo >/dev/null 2>&1; then
    echo "gates: cargo not found; the Rust gates cannot run" >&2
    return 1
  fi
  # built in one target folder for every checkout on this machine (cargo's fingerprints decide
  # what to rebuild), so a fresh clone does not compile the dependencies for clippy and the tests again
  export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/shufflelab/cargo-target}
  gate cargo-fmt cargo fmt --all --check &&
    gate clippy cargo clippy --workspace --all-targets -q -- -D warnings &&
    gate cargo-test cargo test --workspace -q &&
    gate pytest-unit-a .venv/bin/python -m pytest -q -m "not root and not spark" --part a
}

echo "== tier 1: the Python and the Rust gates side by side, each with a part of the tests (each one's output follows when it ends)"
python_gates >"$logs/python.log" 2>&1 &
py=$!
rust_gates >"$logs/rust.log" 2>&1 &
rs=$!
failed=0
wait $rs || failed=1
cat "$logs/rust.log"
wait $py || failed=1
cat "$logs/python.log" # last: pytest's summary line closes the tier
printf '%-14s %4d s (wall, both sides)\n' "tier 1" $((SECONDS - start)) >>"$logs/times"
if [ $failed -ne 0 ]; then
  echo "== gates FAILED (tier 1); times of the gates that passed:"
  cat "$logs/times"
  exit 1
fi

if [ $quick -eq 0 ]; then
  gate pytest-lab .venv/bin/python -m pytest -q -m "root or spark" --durations=15 || {
    cat "$logs/times"
    exit 1
  }
fi
echo "== gates passed"
cat "$logs/times"
printf '%-14s %4d s\n' "total" $((SECONDS - start))
