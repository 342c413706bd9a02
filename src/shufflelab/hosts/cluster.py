"""Spark standalone on inventory hosts: master and workers started over SSH on their hosts, bound
to the data interfaces' addresses, with their scratch in the lease's folder on each host.

The application's driver runs on the master's host. Its request names the run's local folder; the
folder is mapped to one on the host (the request rewritten), and when the driver stops everything
it wrote there (its result, the event logs, the listener's output) is fetched back with SFTP, so
the run's folder -- and the tables written from it -- look as after a local run.

The hosts run the same software as the controller (the venv, pyspark's ``SPARK_HOME``, the
listener jar and the class-data archive), at the controller's paths or in a host's ``deploy_dir``
(:class:`shufflelab.hosts.paths.HostPaths`, filled by ``shufflelab deploy``); ``shufflelab doctor
--hosts`` checks the versions.
"""

from __future__ import annotations

import contextlib
import posixpath
import time
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from shufflelab.emulate.spark import ClusterSpec, Daemon, SparkCluster
from shufflelab.hosts.control import HostLost
from shufflelab.hosts.paths import HostPaths, artifacts_root, pythonpath
from shufflelab.hosts.remote import SshProcess, pull_tree

if TYPE_CHECKING:
    from shufflelab.hosts.backend import HostsBackend
    from shufflelab.hosts.fabric import HostsFabric
    from shufflelab.spec import ExperimentSpec


class DriverProcess:
    """The driver on the master's host; stopping it fetches what it wrote into the run's folder."""

    def __init__(self, proc: SshProcess, backend: HostsBackend, remote_run: str, local_run: Path) -> None:
        self.proc, self.backend, self.remote_run, self.local_run = proc, backend, remote_run, local_run
        self.log = proc.log
        self._pulled = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    def poll(self) -> int | None:
        return self.proc.poll()

    def stop(self, sig: int = 15, grace_s: float = 5.0) -> int | None:
        rc = self.proc.stop(sig, grace_s)
        if not self._pulled:
            self._pulled = True
            skip = [p.name for p in self.local_run.glob("driver_request_*.json")]
            self.backend.loop.call(pull_tree(self.proc.session, self.remote_run, self.local_run, skip))
        return rc


class HostsCluster(SparkCluster):
    def __init__(self, cluster: ClusterSpec, fabric: HostsFabric, backend: HostsBackend, log_dir: Path) -> None:
        master_scratch = fabric.remote_scratch[fabric.places[cluster.master]]
        # one folder name on every host (each host has its own lease folder, the same path)
        super().__init__(
            cluster, dict(fabric.places), dict(fabric.network.host_addresses), Path(master_scratch) / "spark", log_dir
        )
        self.fabric, self.backend = fabric, backend

    # -- where the software is on each host (docs/hosts.md, "Deploying") ------------------------
    def _paths(self, host: str) -> HostPaths:
        return HostPaths.of(self.fabric.session(host).host)

    def _spark_class(self, host: str) -> str:
        return f"{self._paths(host).spark_home}/bin/spark-class"

    def _python(self, host: str) -> str:
        return self._paths(host).python

    @property
    def _deployed(self) -> bool:
        return any(self._paths(h).deployed for h in self.ns)

    def _link(self, what: str) -> str:
        """A link in the lease's folder (the same path on every host) to the host's own ``what``
        (``cache``, ``venv``): the application's conf names the listener jar, and the driver the
        executors' Python, once for every host."""
        return str(PurePosixPath(self.scratch).parent / f"deployed-{what}")

    def _env(self, host: str) -> dict[str, str]:
        env = super()._env(host)
        paths = self._paths(host)
        env["SPARK_HOME"], env["PYSPARK_PYTHON"] = paths.spark_home, paths.python
        if self._deployed:  # no class-data archive there (see app_conf)
            env.pop("SPARK_DAEMON_CLASSPATH", None)
            if opts := _without_cds(env.pop("SPARK_DAEMON_JAVA_OPTS", "")):
                env["SPARK_DAEMON_JAVA_OPTS"] = opts
            env["PYTHONPATH"] = pythonpath(paths)
            env["PYSPARK_PYTHON"] = f"{self._link('venv')}/{posixpath.relpath(paths.python, paths.venv)}"
            script = 'ln -sfn "$1" "$2" && ln -sfn "$3" "$4"'
            links = [paths.cache, self._link("cache"), paths.venv, self._link("venv")]
            self.backend.run(["sh", "-c", script, "sh", *links], place=self.ns[host])
        return env

    def app_conf(
        self,
        spec: ExperimentSpec,
        event_dir: Path,
        partitions: int | None,
        cores_max: int | None = None,
        listener_out: Path | None = None,
    ) -> dict[str, str]:
        """The local backend's conf; with deployed hosts, the listener jar through each host's link
        to its cache folder, and without the class-data archive (recorded for the controller's
        class path: deploy does not bring it to a deploy_dir)."""
        conf = super().app_conf(spec, event_dir, partitions, cores_max, listener_out)
        if not self._deployed:
            return conf
        cache, link = str(artifacts_root()), self._link("cache")
        out = {}
        for k, v in conf.items():
            if k.endswith("extraJavaOptions"):
                v = _without_cds(v)
                if not v:
                    continue
            out[k] = v.replace(cache + "/", link + "/")
        return out

    def _make_dirs(self, host: str, dirs: list[Path]) -> None:
        """The Spark folders are created on the host, over SSH."""
        self.backend.run(["mkdir", "-p", *map(str, dirs)], place=self.ns[host])

    def _spawn(self, host: str, argv: list[str], log: Path, env: dict[str, str]) -> Daemon:
        return self.backend.launch(self.ns[host], argv, log, env=env)

    def _command(self, host: str, argv: list[str]) -> str:
        return self.backend.run(argv, place=self.ns[host], check=False, timeout=10)

    def executor_cpu_ticks(self, wait_s: float = 20.0) -> tuple[int, int] | None:
        """Executors' CPU from each worker daemon's ``cutime``/``cstime`` on its host (after its
        executors are gone, up to ``wait_s``)."""
        script = (
            "live() { for c in $(cat /proc/$1/task/*/children 2>/dev/null); do "  # children not zombies
            "s=$(cut -d')' -f2- /proc/$c/stat 2>/dev/null | awk '{print $1}'); "
            '[ -n "$s" ] && [ "$s" != Z ] && return 0; done; return 1; }; '
            'end=$(( $(date +%s) + $1 )); shift; for p in "$@"; do '
            'while live "$p" && [ "$(date +%s)" -lt "$end" ]; do sleep 0.2; done; '
            "cut -d')' -f2- /proc/$p/stat | awk '{print $14, $15}'; done"
        )
        user = system = 0
        deadline = time.monotonic() + wait_s  # one wait for all workers, as here
        for w in self.spec.workers:
            d = self.daemons.get(w)
            if d is None:
                return None
            left = max(0, int(deadline - time.monotonic()))
            out = self.backend.run(
                ["sh", "-c", script, "sh", str(left), str(d.pid)],
                place=self.ns[w],
                check=False,
                timeout=wait_s + 10,
            ).split()
            if len(out) != 2 or not all(x.isdigit() for x in out):
                return None
            user, system = user + int(out[0]), system + int(out[1])
        return user, system

    # -- per-run log slices (the daemons' logs are on their hosts) -------------------------------
    def _remote_log(self, name: str) -> str:
        d = self.daemons[name]
        assert isinstance(d, SshProcess)
        return d.remote_log

    def log_marks(self) -> dict[str, int]:
        marks = {}
        for n in self.daemons:
            out = self.backend.run(["stat", "-c", "%s", self._remote_log(n)], place=self.ns[n], check=False).strip()
            marks[n] = int(out) if out.isdigit() else 0
        return marks

    def copy_logs_since(self, marks: dict[str, int], dest: Path, app_ids: list[str]) -> None:
        """Each daemon log's part written since ``marks`` (read on its host) and the apps' executor
        logs (fetched from the workers' work folders). A host that dropped off is skipped: its
        daemon's log slice says why (the logs stay on the host)."""
        dest.mkdir(parents=True, exist_ok=True)
        for name, d in self.daemons.items():
            try:
                part = self.backend.run(
                    ["tail", "-c", f"+{marks.get(name, 0) + 1}", self._remote_log(name)],
                    place=self.ns[name],
                    check=False,
                )
            except HostLost as exc:
                part = f"shufflelab: not fetched: {exc}\n"
            (dest / d.log.name).write_text(part)
        for app_id in app_ids:
            for w in self.spec.workers:
                session = self.fabric.session(w)
                src = str(PurePosixPath(self.scratch) / w / "work" / app_id)
                with contextlib.suppress(HostLost):
                    self.backend.loop.call(pull_tree(session, src, dest / app_id / f"executors-{w}"))

    # -- the driver ------------------------------------------------------------------------------
    def _remote_run(self, local_run: Path) -> str:
        """The folder on the master's host that stands for the run's folder ``local_run``."""
        return str(PurePosixPath(self.scratch).parent / "runs" / local_run.name)

    def session_ready(self, result: Path) -> bool:
        """The driver's ``.ready`` marker next to ``result``'s counterpart on the master's host."""
        marker = f"{self._remote_run(result.parent)}/{result.with_suffix('.ready').name}"
        return "yes" in self._command(self.spec.master, ["sh", "-c", 'test -e "$1" && echo yes', "sh", marker])

    def driver(self, request_path: Path, log: Path) -> DriverProcess:
        """Start the driver on the master's host on ``request_path`` with the run's folder mapped
        to a folder there (and, with deployed hosts, the controller's cache to each host's link to
        its own: a jar the request puts on the driver's and executors' class path is found on every
        host, whatever its ``deploy_dir``)."""
        m = self.spec.master
        local_run = request_path.parent
        remote_run = self._remote_run(local_run)
        text = request_path.read_text().replace(str(local_run), remote_run)
        if self._deployed:  # what the request names in the controller's cache (the NDP connector's jar
            # on the class path): each host's own, through its link, whatever its deploy_dir
            text = text.replace(f"{artifacts_root()}/", f"{self._link('cache')}/")
        remote_request = f"{remote_run}/{request_path.name}"
        script = 'mkdir -p "$1/eventlog" "$1/listener" && cat > "$2"'
        session = self.fabric.session(m)

        async def put() -> None:
            await session.run(
                "write the driver's request", ["sh", "-c", script, "sh", remote_run, remote_request], input=text
            )

        self.backend.loop.call(put())
        env = self._env(m)
        paths = self._paths(m)
        env["PYTHONPATH"] = pythonpath(paths)
        proc = self.backend.launch(
            self.ns[m], [paths.python, "-m", "shufflelab.workloads.driver", remote_request], log, env=env
        )
        return DriverProcess(proc, self.backend, remote_run, local_run)


def _without_cds(java_options: str) -> str:
    """JVM options without the class-data archive's."""
    words = java_options.split()
    return " ".join(w for w in words if not w.startswith("-XX:SharedArchiveFile=") and w != "-Xshare:auto")
