"""A Spark standalone cluster inside the fabric: master and workers from the pip ``pyspark``.

Each daemon runs in its host's namespace, bound to that host's address (``SPARK_LOCAL_IP``), with
its own local dirs. Daemon logs live for the cluster's lifetime; :meth:`SparkCluster.log_marks` and
:meth:`SparkCluster.copy_logs_since` cut each run's share of them into the run's folder.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from shufflelab import jvm, listener, procfs
from shufflelab import sparkconf as sc
from shufflelab.emulate import cds, netns
from shufflelab.emulate.netns import NamespaceProcess
from shufflelab.spec import ExperimentSpec

MASTER_PORT = 7077
WORKER_PORT = 7078  # fixed so that daemon (control-plane) connections can be told apart
MASTER_UI_PORT = 8080  # the master's web UI; its /json/ is the master's own view of the cluster
DAEMON_PORTS = (MASTER_PORT, WORKER_PORT)
FAST_JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


class ClusterError(RuntimeError):
    pass


class Daemon(Protocol):
    """A process of the cluster: :class:`netns.NamespaceProcess` here, an SSH-started one on real hosts."""

    log: Path

    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None: ...

    def stop(self, sig: int = ..., grace_s: float = ...) -> int | None: ...


def not_ready(status: dict[str, Any] | None, url: str, workers: dict[str, int]) -> str | None:
    """What keeps a standalone cluster from being ready, judged from its master's status (the web
    UI's ``/json/``): the master ALIVE at ``url`` and every worker of ``workers`` (address -> cores)
    registered, ALIVE and offering its cores. None when ready."""
    if not status:
        return "the master does not answer yet"
    if status.get("url") != url:
        return f"the master's URL is {status.get('url')!r}, not {url!r}"
    if status.get("status") != "ALIVE":
        return f"the master is {status.get('status')!r}"
    alive = {w.get("host"): w for w in status.get("workers", []) if w.get("state") == "ALIVE"}
    missing = [h for h in workers if h not in alive]
    if missing:
        return f"workers not registered and alive: {', '.join(missing)}"
    short = [f"{h} ({alive[h].get('cores')} of {c})" for h, c in workers.items() if alive[h].get("cores") != c]
    if short:
        return f"workers offering fewer cores than configured: {', '.join(short)}"
    return None


# Fetches the master's status inside its namespace (the runner lives outside the fabric).
_FETCH = (
    "import sys, urllib.request\n"
    "try:\n"
    "    sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=2).read().decode())\n"
    "except Exception:\n"
    "    pass\n"
)


@dataclass(frozen=True)
class ClusterSpec:
    """What a running cluster was started with; runs reuse it only if theirs is equal."""

    master: str
    workers: tuple[str, ...]
    worker_cores: int
    worker_memory: str
    fast_jvm: bool
    cds: bool = True  # the master and the workers too start from the class-data archive

    @staticmethod
    def of(spec: ExperimentSpec) -> ClusterSpec:
        return ClusterSpec(
            master=spec.hosts_with("spark-master")[0],
            workers=tuple(spec.hosts_with("spark-worker")),
            worker_cores=spec.spark.worker_cores,
            worker_memory=spec.spark.worker_memory,
            fast_jvm=spec.spark.fast_jvm,
            cds=spec.spark.cds,
        )


class SparkCluster:
    def __init__(
        self,
        cluster: ClusterSpec,
        ns: dict[str, str],
        addresses: dict[str, str],
        scratch: Path,
        log_dir: Path,
    ) -> None:
        self.spec = cluster
        self.ns = ns
        self.addresses = addresses
        self.scratch = scratch
        self.log_dir = log_dir
        self.daemons: dict[str, Daemon] = {}

    @property
    def master_ip(self) -> str:
        return self.addresses[self.spec.master]

    @property
    def url(self) -> str:
        return f"spark://{self.master_ip}:{MASTER_PORT}"

    def _env(self, host: str) -> dict[str, str]:
        env = {
            "SPARK_HOME": str(jvm.spark_home()),
            "SPARK_LOCAL_IP": self.addresses[host],
            "SPARK_LOCAL_DIRS": str(self.scratch / host / "local"),
            "SPARK_WORKER_DIR": str(self.scratch / host / "work"),
            # Python's temporary files in the cluster's scratch folder, removed with it: pyspark's
            # driver makes a folder for the gateway's connection file with tempfile.mkdtemp() and
            # removes it only when the JVM answers, so a driver killed while its JVM starts (a run
            # interrupted or timed out) left an empty one in /tmp for good
            "TMPDIR": str(self.scratch / host / "tmp"),
            "SPARK_DAEMON_MEMORY": "256m",
            "SPARK_NO_DAEMONIZE": "1",
            "PYSPARK_PYTHON": sys.executable,
        }
        daemon_opts = [FAST_JVM_OPTS] if self.spec.fast_jvm else []
        if self.spec.cds and cds.java_options():
            # the master and workers load most of the drivers' and executors' classes: the archive
            # serves them too when their class path starts as the archive's (the listener jar first;
            # Spark's launcher puts SPARK_DAEMON_CLASSPATH before its conf folder and jars) -- a third
            # less CPU to start a daemon (about 1.0 of 2.5 CPU-s for a master)
            env["SPARK_DAEMON_CLASSPATH"] = str(listener.ensure_jar())
            daemon_opts.append(cds.java_options())
        if daemon_opts:
            env["SPARK_DAEMON_JAVA_OPTS"] = " ".join(daemon_opts)
        self._make_dirs(host, [self.scratch / host / d for d in ("local", "work", "tmp")])
        return env

    def _spark_class(self, host: str) -> str:
        """Spark's launcher on ``host`` (here: this machine's pyspark)."""
        return str(jvm.spark_home() / "bin" / "spark-class")

    def _python(self, host: str) -> str:
        """The Python interpreter on ``host`` (here: this one)."""
        return sys.executable

    def _make_dirs(self, host: str, dirs: list[Path]) -> None:
        """Create the Spark folders of ``host`` (here: on this machine's file system)."""
        for d in dirs:
            d.mkdir(parents=True, exist_ok=True)

    def _spawn(self, host: str, argv: list[str], log: Path, env: dict[str, str]) -> Daemon:
        """Start one of the cluster's processes on ``host`` (a daemon or a driver)."""
        return NamespaceProcess(self.ns[host], argv, log, env=env)

    def _command(self, host: str, argv: list[str]) -> str:
        """A short command on ``host``; its stdout (empty when it fails)."""
        return netns.run(argv, ns=self.ns[host], check=False, timeout=10)

    def start(self, timeout_s: float = 120) -> None:
        m = self.spec.master
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.daemons[m] = self._spawn(
            m,
            [self._spark_class(m), "org.apache.spark.deploy.master.Master", "--host", self.master_ip,
             "--port", str(MASTER_PORT), "--webui-port", "8080"],
            self.log_dir / f"master-{m}.log",
            env=self._env(m),
        )  # fmt: skip
        deadline = time.monotonic() + timeout_s
        self._wait_until_ready({}, deadline)  # the master first: workers register with it
        for w in self.spec.workers:
            self.daemons[w] = self._spawn(
                w,
                [self._spark_class(w), "org.apache.spark.deploy.worker.Worker", "--host", self.addresses[w],
                 "--port", str(WORKER_PORT),
                 "--cores", str(self.spec.worker_cores), "--memory", self.spec.worker_memory,
                 "--work-dir", str(self.scratch / w / "work"), "--webui-port", "8081", self.url],
                self.log_dir / f"worker-{w}.log",
                env=self._env(w),
            )  # fmt: skip
        self._wait_until_ready({self.addresses[w]: self.spec.worker_cores for w in self.spec.workers}, deadline)

    def master_status(self) -> dict[str, Any] | None:
        """The master's own view of the cluster (its web UI's JSON), None if it does not answer."""
        out = self._command(
            self.spec.master,
            [
                self._python(self.spec.master),
                "-I",
                "-S",
                "-c",
                _FETCH,
                f"http://{self.master_ip}:{MASTER_UI_PORT}/json/",
            ],
        )
        try:
            doc = json.loads(out)
        except ValueError:
            return None
        return doc if isinstance(doc, dict) else None

    def worker_pids(self) -> list[int]:
        return [self.daemons[w].pid for w in self.spec.workers if w in self.daemons]

    def executor_cpu_ticks(self, wait_s: float = 20.0) -> tuple[int, int] | None:
        """Executors' user and system CPU so far, in clock ticks: each worker daemon reaps its
        executor processes, so its ``cutime``/``cstime`` grow by every finished executor's time.
        Waits (up to ``wait_s``) until no executor is alive, so a run's executors are all counted."""
        deadline = time.monotonic() + wait_s
        pids = self.worker_pids()
        while any(procfs.live_children(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.2)
        user = system = 0
        for pid in pids:
            t = procfs.child_times(pid)
            if t is None:
                return None
            user, system = user + t[0], system + t[1]
        return user, system

    def _wait_until_ready(self, workers: dict[str, int], deadline: float) -> None:
        """Until the master reports itself and ``workers`` (address -> cores) alive. Its status, not
        its log: the log outlives a cluster (a restarted cluster appends to it), the status does not."""
        while True:
            for name, d in self.daemons.items():
                if d.poll() is not None:
                    raise ClusterError(f"Spark daemon on {name} exited ({d.poll()}); see {d.log}")
            why = not_ready(self.master_status(), self.url, workers)
            if why is None:
                return
            if time.monotonic() > deadline:
                m = self.daemons[self.spec.master]
                raise ClusterError(f"Spark cluster not ready in time: {why}; see {m.log}")
            time.sleep(0.3)

    def alive(self) -> bool:
        return bool(self.daemons) and all(d.poll() is None for d in self.daemons.values())

    def stop(self) -> None:
        for name in list(self.daemons)[::-1]:  # workers first, then the master
            self.daemons.pop(name).stop(grace_s=10)

    # -- per-run log slices ----------------------------------------------------------------------
    def session_ready(self, result: Path) -> bool:
        """The driver's ``.ready`` marker next to ``result`` (the driver runs on this machine)."""
        return result.with_suffix(".ready").exists()

    def log_marks(self) -> dict[str, int]:
        return {n: (d.log.stat().st_size if d.log.exists() else 0) for n, d in self.daemons.items()}

    def copy_logs_since(self, marks: dict[str, int], dest: Path, app_ids: list[str]) -> None:
        """Copy each daemon log's part written since ``marks`` and the apps' executor logs."""
        dest.mkdir(parents=True, exist_ok=True)
        for name, d in self.daemons.items():
            with open(d.log, "rb") as fh:
                fh.seek(marks.get(name, 0))
                (dest / d.log.name).write_bytes(fh.read())
        for app_id in app_ids:
            for w in self.spec.workers:
                src = self.scratch / w / "work" / app_id
                if src.exists():
                    shutil.copytree(src, dest / app_id / f"executors-{w}", dirs_exist_ok=True)

    # -- the driver ----------------------------------------------------------------------------------
    def app_conf(
        self,
        spec: ExperimentSpec,
        event_dir: Path,
        partitions: int | None,
        cores_max: int | None = None,
        listener_out: Path | None = None,
    ) -> dict[str, str]:
        """Spark conf of one application: event log, no shuffle compression (default), our hosts.

        ``cores_max`` caps the application's cores (simultaneous applications split the cluster);
        ``listener_out`` attaches shufflelab's task listener writing there (when ``spark.listener``).
        """
        s = spec.spark
        total_cores = cores_max or s.worker_cores * len(self.spec.workers)
        lab: dict[str, str] = {
            sc.MASTER: self.url,
            sc.DRIVER_HOST: self.master_ip,
            sc.DRIVER_BIND_ADDRESS: self.master_ip,
            "spark.driver.memory": s.driver_memory,
            "spark.executor.memory": s.executor_memory,
            sc.EXECUTOR_CORES: str(s.worker_cores),
            sc.CORES_MAX: str(total_cores),
            sc.EVENT_LOG_ENABLED: "true",
            sc.EVENT_LOG_DIR: f"file://{event_dir}",
            sc.EVENT_LOG_COMPRESS: "false",
            sc.EVENT_LOG_ROLLING: "false",
            "spark.shuffle.compress": str(s.shuffle_compress).lower(),
            "spark.shuffle.spill.compress": str(s.shuffle_compress).lower(),
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.adaptive.enabled": "false",
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            "spark.scheduler.maxRegisteredResourcesWaitingTime": "60s",
            sc.LOCAL_DIR: str(self.scratch / self.spec.master / "local"),
        }
        if partitions:
            lab["spark.sql.shuffle.partitions"] = str(partitions)
            lab["spark.default.parallelism"] = str(partitions)
        jvm_opts = [FAST_JVM_OPTS] if self.spec.fast_jvm else []
        if s.cds and cds.java_options():
            jvm_opts.append(cds.java_options())
            lab.update(cds.class_path_conf())
        if jvm_opts:
            lab["spark.driver.extraJavaOptions"] = " ".join(jvm_opts)
            lab["spark.executor.extraJavaOptions"] = " ".join(jvm_opts)
        if listener_out is not None and s.listener:
            lab.update(listener.spark_conf(listener.ensure_jar(), listener_out, s.heartbeat_s))
        user = {**s.conf, **spec.workload.conf}  # a user application's own conf, then the spec's
        if spec.workload.jar:  # the application's jar, after any jars its conf lists
            user["spark.jars"] = ",".join(j for j in [user.get("spark.jars"), spec.workload.jar] if j)
        # the spec's conf wins over the lab's defaults, never over what the lab relies on (sparkconf)
        return sc.application_conf(lab, user)

    def driver(self, request_path: Path, log: Path) -> Daemon:
        m = self.spec.master
        env = self._env(m)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        return NamespaceProcess(
            self.ns[m],
            [sys.executable, "-m", "shufflelab.workloads.driver", str(request_path)],
            log,
            env=env,
        )
