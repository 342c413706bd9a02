#!/usr/bin/env bash
# How busy the whole machine is while a command runs: the busy share of all CPUs (user, nice,
# system, irq, softirq, steal over all but idle and iowait) from /proc/stat every PERIOD seconds
# (default 5), everything on the machine counted -- Spark daemons and the stand-ins' sshd included,
# which `time` misses. Usage:
#   benchmarks/busy_share.sh OUT COMMAND...     e.g.
#   benchmarks/busy_share.sh /tmp/pass.busy ./.ci/run
# OUT gets one line per sample: "<seconds since start> <busy, in % of one CPU: 200 = both of 2>".
# Prints at the end: the busy CPU-seconds and the wall time. Exits with the command's status.
set -uo pipefail
out=$1
shift
period=${PERIOD:-5}
: >"$out"
stat() { read -r _ u n s i w q sq st _ </proc/stat; echo "$((u + n + s + q + sq + st)) $((u + n + s + q + sq + st + i + w))"; }
ncpu=$(nproc)
sample() {
  local t0=$1 pb pt b t now
  read -r pb pt < <(stat)
  while sleep "$period"; do
    read -r b t < <(stat)
    now=$(date +%s.%N)
    [ "$t" -gt "$pt" ] && echo "$(python3 -c "print(round($now - $t0))") $((100 * ncpu * (b - pb) / (t - pt)))" >>"$out"
    pb=$b pt=$t
  done
}
read -r b0 _ < <(stat)
start=$(date +%s.%N)
sample "$start" &
sampler=$!
trap 'kill $sampler 2>/dev/null' EXIT
"$@"
rc=$?
kill $sampler 2>/dev/null
read -r b1 _ < <(stat)
end=$(date +%s.%N)
python3 -c "import os, sys; hz = os.sysconf('SC_CLK_TCK'); print(f'busy {(int(sys.argv[2]) - int(sys.argv[1])) / hz:.0f} CPU-s in {float(sys.argv[4]) - float(sys.argv[3]):.0f} s')" \
  "$b0" "$b1" "$start" "$end"
exit $rc
