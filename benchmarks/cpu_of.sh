#!/usr/bin/env bash
# The CPU time of a command and everything it starts (Spark daemons and executors included, which
# outlive the processes `time` waits for), from a cgroup v1 cpuacct group of its own; and its wall
# time. Root. Usage:
#   benchmarks/cpu_of.sh LABEL COMMAND...     e.g.
#   benchmarks/cpu_of.sh new .venv/bin/python -m pytest -q tests/integration/test_run_validity_fabric.py -k started
# Prints: LABEL rc=.. cpu_s=.. wall_s=..
set -uo pipefail
label=$1
shift
root=/sys/fs/cgroup/cpuacct
[ -d "$root" ] || { echo "cpu_of: no cgroup v1 cpuacct hierarchy at $root" >&2; exit 2; }
group=$(mktemp -d "$root/shufflelab-cpu-of-XXXXXX")
# what still runs when this ends (counted up to here) goes back to the root group, so that the group
# can always be removed
trap 'for p in $(cat "$group/cgroup.procs" 2>/dev/null); do echo "$p" >"$root/cgroup.procs" 2>/dev/null; done
      rmdir "$group" 2>/dev/null || true' EXIT
t0=$(date +%s.%N)
bash -c 'echo $$ >"$1/cgroup.procs"; shift; exec "$@"' _ "$group" "$@"
rc=$?
# what the command left running a moment longer (daemons stopping) is counted too
# (cgroupfs files read as size 0: `test -s` cannot tell, the content can)
for _ in 1 2 3 4 5 6 7 8 9 10; do [ -n "$(cat "$group/cgroup.procs")" ] || break; sleep 1; done
t1=$(date +%s.%N)
python3 -c "import sys; print(f'{sys.argv[1]} rc={sys.argv[2]} cpu_s={int(sys.argv[3]) / 1e9:.1f} wall_s={float(sys.argv[5]) - float(sys.argv[4]):.1f}')" \
  "$label" "$rc" "$(cat "$group/cpuacct.usage")" "$t0" "$t1"
exit $rc
