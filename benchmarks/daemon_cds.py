"""Benchmark: the CPU a Spark master JVM takes to start, with and without the class-data archive.

Starts ``org.apache.spark.deploy.master.Master`` on 127.0.0.1 (port 17077, no web UI) as the lab
starts it (``SPARK_DAEMON_JAVA_OPTS``, with ``spark.fast_jvm``'s options), once without the archive
and once from it (``SPARK_DAEMON_CLASSPATH`` = the listener jar, so the class path starts as the
archive's; the archive's options), in turn, ``--rounds`` times: ratios are read pair by pair. Each
JVM's CPU (user + system, from /proc) is read once it logs that it leads, then it is stopped. Needs
the archive (``make setup`` records it) and Java; no root.

    .venv/bin/python benchmarks/daemon_cds.py --rounds 5 --out docs/benchmarks-daemon-cds.json
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from shufflelab import jvm, listener
from shufflelab.emulate import cds
from shufflelab.emulate.spark import FAST_JVM_OPTS

HZ = os.sysconf("SC_CLK_TCK")


def _java_pid(group: int) -> int | None:
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if os.getpgid(int(pid)) == group and Path(f"/proc/{pid}/comm").read_text().strip() == "java":
                return int(pid)
        except OSError:
            continue
    return None


def master_cpu(with_archive: bool, timeout_s: float = 60.0) -> dict[str, float]:
    env = {
        **os.environ,
        "SPARK_HOME": str(jvm.spark_home()),
        "SPARK_NO_DAEMONIZE": "1",
        "SPARK_DAEMON_MEMORY": "256m",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_DAEMON_JAVA_OPTS": FAST_JVM_OPTS,
    }
    if with_archive:
        env["SPARK_DAEMON_CLASSPATH"] = str(listener.ensure_jar())
        env["SPARK_DAEMON_JAVA_OPTS"] += " " + cds.java_options()
    with tempfile.TemporaryFile("w+") as log:
        t0 = time.monotonic()
        p = subprocess.Popen(
            [str(jvm.spark_home() / "bin" / "spark-class"), "org.apache.spark.deploy.master.Master",
             "--host", "127.0.0.1", "--port", "17077", "--webui-port", "0"],
            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )  # fmt: skip
        try:
            while "I have been elected leader" not in (log.seek(0) or log.read()):
                if p.poll() is not None or time.monotonic() - t0 > timeout_s:
                    raise RuntimeError(f"the master did not start:\n{log.read()[-2000:]}")
                time.sleep(0.05)
            wall = time.monotonic() - t0
            pid = _java_pid(p.pid)
            assert pid is not None
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / HZ
        finally:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(timeout=30)
    return {"cpu_s": cpu, "wall_s": wall}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    if not cds.java_options():
        print("no class-data archive: run `make setup` first", file=sys.stderr)
        return 2
    rows = []
    for i in range(a.rounds):
        without, with_ = master_cpu(False), master_cpu(True)
        rows.append({"round": i, "without": without, "with": with_, "cpu_ratio": with_["cpu_s"] / without["cpu_s"]})
        print(f"round {i}: CPU {without['cpu_s']:.2f} s without the archive, {with_['cpu_s']:.2f} s with it "
              f"(ratio {rows[-1]['cpu_ratio']:.2f})")  # fmt: skip
    med = statistics.median(r["cpu_ratio"] for r in rows)
    print(f"median CPU ratio (with / without), pair by pair: {med:.2f}")
    if a.out:
        a.out.write_text(json.dumps({"command": "benchmarks/daemon_cds.py", "rounds": rows, "median_cpu_ratio": med},
                                    indent=1) + "\n")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
