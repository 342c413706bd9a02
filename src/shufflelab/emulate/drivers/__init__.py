"""Workload drivers: what differs between workload kinds, behind one protocol.

The runner (:mod:`shufflelab.emulate.runner`) plans the runs, builds each group's fabric (and Spark
cluster when the kind ``needs_cluster``), and drives every run the same way, whatever its kind::

    driver = Kind(ctx, group, backend)     # ctx: the run's RunContext; nothing started yet
    telemetry.start(...)                   # fabric configured, self-test, sampler, cross traffic
    jobs = driver.start(phase)             # launch the job(s)
    waited = waiting.wait(jobs, fabric, driver.timeout_s, ..., tick=driver.tick)  # the one wait loop
    driver.collect(waited)                 # read what the jobs left; the run may fail here
    # always, also after a failure or Ctrl-C:
    driver.release()                       # stop what start() left running
    telemetry.stop(...)
    driver.keep_artifacts()                # copy logs kept elsewhere into the run's folder
    store.write_run(driver.record())       # pure assembly (emulate.record) over the RunContext

A kind may also start something once per group (``open_group``/``close_group``: HDFS and the NDP
proxies of ``tpch``). The kinds: :class:`SparkDriver` (the built-in Spark workloads and the user's
application), :class:`TpchDriver` (TPC-H through near-data processing), :class:`ReplayDriver`
(MapReduce shuffle replay, no Spark).

**The user's own application** (``workload.name = "app"``: a PySpark script or a jar) runs today
through :class:`SparkDriver`: the lab's driver process creates the session with the lab's conf and
hands it to the script or the jar's ``main`` (:mod:`shufflelab.workloads.userapp`). An application
that must be submitted as it is (``spark-submit`` with its own ``main``) plugs in as a subclass of
:class:`SparkDriver` that overrides :meth:`SparkDriver.launch` to start ``spark-submit --master
<cluster.url> --conf <request["conf"]> ...`` through ``backend.launch`` on the master's place, and
writes the driver result (the application id) :meth:`SparkDriver.collect` reads; event logs,
listener, telemetry, faults and the record stay as they are. Register it in :func:`kind_of`.
"""

from __future__ import annotations

from shufflelab.emulate.drivers.base import Driver, Group, Phase, WorkloadDriver
from shufflelab.emulate.drivers.mapreduce import ReplayDriver
from shufflelab.emulate.drivers.spark import SparkDriver, cc_in_ss
from shufflelab.emulate.drivers.tpch import TpchDriver
from shufflelab.spec import ExperimentSpec

__all__ = [
    "Driver", "Group", "Phase", "ReplayDriver", "SparkDriver", "TpchDriver", "WorkloadDriver", "cc_in_ss", "kind_of",
]  # fmt: skip


def kind_of(spec: ExperimentSpec) -> type[Driver]:
    """The driver of ``spec``'s workload."""
    if spec.workload.name == "mapreduce":
        return ReplayDriver
    if spec.workload.name == "tpch":
        return TpchDriver
    return SparkDriver
