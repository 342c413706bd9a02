#!/usr/bin/env bash
# The project's gates, each timed. Two tiers:
#   1. side by side (one core each): the Python gates (ruff, ruff format, mypy, then part b of the
#      tests that need neither root nor Spark) and the Rust gates (cargo fmt, clippy, cargo test,
#      then part a of those tests; tests/conftest.py's --part splits them by file, each runs once);
#   2. the tests that need root or start Spark (real namespaces, real Spark, the SSH stand-in hosts),
#      in two lanes (pytest-xdist, --dist loadfile: each test file in one lane, so its module fixtures
#      -- a lab, an experiment two tests read -- are made once; each lane its own six-host lab; the
#      longest files first, tests/conftest.py's LONGEST_FIRST): one
#      lane's tests wait on shaped links, fault windows and SSH round trips while the other's use
#      the CPU; before them, without Spark beside them, the tests marked ``fidelity`` (the emulated
#      network measured against its configuration: a probe or the userspace switch waiting for a CPU
#      the other lane's Spark JVMs hold reads a slow link or a long delay, as the self-test did:
#      15.99 ms for 10 ms). They come first so that tier 1, at the lowest priority, takes the CPU
#      they leave (they mostly wait on shaped links): run last, alone, they left the machine about
#      40 % idle for their two minutes.
# `scripts/gates.sh --quick` (`make check`) runs tier 1 alone. `scripts/gates.sh` (the README's
# `make test`, so CI) starts tier 2 first, at normal priority, and runs tier 1 beside it at the lowest
# priority: tier 1 takes the CPU tier 2 leaves while it waits (shaped links, fault windows, SSH round
# trips), and tier 2's timing-sensitive checks keep the machine's CPU whenever they want it. Each
# tier runs in a session of its own; with the kernel's autogroups on (Debian's default), CPU is
# shared between sessions before nice counts within one, so `nice 19` alone gave tier 1 an equal
# share beside tier 2 -- tier 1's session gets autogroup nice 19 as well (lowest_priority). When
# tier 1 fails, tier 2 is interrupted (SIGINT to its process group: its fixtures and runs tear
# down); so is everything when the gates themselves are interrupted.
# Every test runs in exactly one of the three pytest runs (the markers and --part split the suite).
# Printed at the end: each gate's time, the slowest tests of all pytest runs, and the total.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
[ "${1:-}" = "--quick" ] && quick=1

start=$SECONDS
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
tier1_nice=0 # tier 1 beside tier 2: nice 19
[ $quick -eq 0 ] && tier1_nice=19

# lowest_priority: this session's processes yield the CPU to every other session's (autogroup nice
# 19, where the kernel groups CPU shares by session; a no-op where it does not)
lowest_priority() {
  echo 19 2>/dev/null >/proc/self/autogroup || true
}

# gate NAME COMMAND...: runs the command; its time goes to the summary. Returns its failure.
gate() {
  local name=$1
  shift
  local t0=$SECONDS
  echo "== $name: $*"
  if ! nice -n "$tier1_nice" "$@"; then
    echo "== $name FAILED after $((SECONDS - t0)) s"
    return 1
  fi
  printf '%-14s %4d s\n' "$name" $((SECONDS - t0)) >>"$logs/times"
}

python_gates() {
  # mypy's cache in one folder for every checkout on this machine: mypy re-checks a module whose
  # source hash differs from the cached one (and what depends on it), so a fresh clone re-uses what
  # another checkout of the same sources found (31 s -> under 1 s) and never trusts a stale entry
  export MYPY_CACHE_DIR=${MYPY_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/shufflelab/mypy}
  gate ruff .venv/bin/ruff check src tests benchmarks scripts examples &&
    gate ruff-format .venv/bin/ruff format --check src tests benchmarks scripts examples &&
    gate mypy .venv/bin/mypy &&
    gate pytest-unit-b .venv/bin/python -m pytest -q -m "not root and not spark" --part b --durations=10
}

rust_gates() {
  if ! command -v cargo >/dev/null 2>&1; then
    echo "gates: cargo not found; the Rust gates cannot run" >&2
    return 1
  fi
  # built in one target folder for every checkout on this machine (cargo's fingerprints decide
  # what to rebuild), from a copy of the workspace in one folder (scripts/stage_rust.py: cargo names a
  # member's build by its path), so a fresh clone at any path compiles only what changed
  local cache=${XDG_CACHE_HOME:-$HOME/.cache}/shufflelab
  export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$cache/cargo-target}
  gate cargo-fmt cargo fmt --all --check || return 1
  mkdir -p "$cache"
  (
    exec 9>"$cache/rust-workspace.lock" # one checkout at a time copies and builds there
    flock 9
    ws=$(.venv/bin/python scripts/stage_rust.py "$cache/rust-workspace") || exit 1
    echo "== clippy and cargo test in $ws, a copy of this checkout's workspace"
    cd "$ws" || exit 1
    gate clippy cargo clippy --workspace --all-targets -q -- -D warnings &&
      gate cargo-test cargo test --workspace -q
  ) &&
    gate pytest-unit-a .venv/bin/python -m pytest -q -m "not root and not spark" --part a --durations=10
}

# the slowest tests of every pytest run so far (pytest's --durations lines: "12.34s call  tests/...")
slowest() {
  echo "== slowest tests (all pytest runs; setup includes module fixtures such as a shared lab)"
  cat "$logs"/*.log 2>/dev/null | grep -E '^[0-9]+\.[0-9]+s (setup|call|teardown) ' | sort -rn | head -15 || true
}

summary() {
  cat "$logs/times"
  slowest
  printf '%-14s %4d s\n' "total" $((SECONDS - start))
}

lab=
if [ $quick -eq 0 ]; then
  echo "== tier 2: the root/Spark tests, started now (their output follows at the end)"
  # its own session and process group, so that a failure of tier 1 can interrupt all of it; SIGINT
  # and SIGQUIT as in the foreground: bash ignores them in a background command, a shell cannot undo
  # an ignore it started with (trap - does nothing), and what ignores them passes that on -- pytest
  # then never stops on SIGINT, and the runners and controllers the tests interrupt start ignoring it
  # too; env --default-signal gives the tier the default dispositions back
  (
    exec setsid env --default-signal=INT,QUIT bash -c '.venv/bin/python -m pytest -q -m "(root or spark) and fidelity" --durations=5 && \
      .venv/bin/python -m pytest -q -m "(root or spark) and not fidelity" -n 2 --dist loadfile \
      --no-loadscope-reorder --durations=15'
  ) >"$logs/lab.log" 2>&1 &
  lab=$!
fi

echo "== tier 1: the Python and the Rust gates side by side, each with a part of the tests (each one's output follows when it ends)"
# each side in a session of its own (setsid: the forked subshell is no group leader, so setsid keeps
# its pid), SIGINT and SIGQUIT back to the default as for tier 2, so that an interruption reaches
# them; beside tier 2 with the session's lowest priority, so tier 2's sessions keep the CPU they want
export -f gate python_gates rust_gates lowest_priority
export logs tier1_nice
first=true
[ $quick -eq 0 ] && first=lowest_priority
setsid env --default-signal=INT,QUIT bash -c "$first; python_gates" >"$logs/python.log" 2>&1 &
py=$!
setsid env --default-signal=INT,QUIT bash -c "$first; rust_gates" >"$logs/rust.log" 2>&1 &
rs=$!
# interrupted (Ctrl-C, a CI's SIGTERM): every tier's process group gets SIGINT and tears down (its
# sessions are not the terminal's, so the terminal's SIGINT reaches none of them by itself)
interrupted() {
  echo "== gates interrupted: stopping every tier"
  for group in $lab $py $rs; do kill -INT -- "-$group" 2>/dev/null || true; done
  wait
  exit 130
}
trap interrupted INT TERM
failed=0
wait $rs || failed=1
cat "$logs/rust.log"
wait $py || failed=1
cat "$logs/python.log" # last: pytest's summary line closes the tier
printf '%-14s %4d s (wall, both sides)\n' "tier 1" $((SECONDS - start)) >>"$logs/times"
if [ $failed -ne 0 ]; then
  if [ -n "$lab" ]; then
    echo "== tier 1 FAILED: interrupting tier 2"
    kill -INT -- "-$lab" 2>/dev/null || true
    wait "$lab" || true
    tail -n 30 "$logs/lab.log"
  fi
  echo "== gates FAILED (tier 1); times of the gates that passed:"
  summary
  exit 1
fi

if [ -n "$lab" ]; then
  lab_failed=0
  wait "$lab" || lab_failed=1
  cat "$logs/lab.log"
  if [ $lab_failed -ne 0 ]; then
    echo "== pytest-lab FAILED after $((SECONDS - start)) s"
    summary
    exit 1
  fi
  printf '%-14s %4d s (wall, from the start; tier 1 beside it)\n' "pytest-lab" $((SECONDS - start)) >>"$logs/times"
fi
echo "== gates passed"
summary
