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
proxies of ``tpch``). Here is :class:`SparkDriver` (the built-in Spark workloads and the user's
application); the kinds that put a package of their own to work -- ``tpch`` (TPC-H through
near-data processing, :mod:`shufflelab.ndp`) and ``mapreduce`` (the shuffle replay without Spark,
:mod:`shufflelab.mapreduce`) -- have their drivers in :mod:`shufflelab.kinds`, above both this
backend and those packages, and the runner is handed them (``EmulateRunner(..., kinds=...)``):
:func:`kind_of` finds a run's driver by its workload's name.

**The user's own application** (``workload.name = "app"``: a PySpark script or a jar) runs today
through :class:`SparkDriver`: the lab's driver process creates the session with the lab's conf and
hands it to the script or the jar's ``main`` (:mod:`shufflelab.workloads.userapp`). An application
that must be submitted as it is (``spark-submit`` with its own ``main``) plugs in as a subclass of
:class:`SparkDriver` that overrides :meth:`SparkDriver.launch` to start ``spark-submit --master
<cluster.url> --conf <request["conf"]> ...`` through ``backend.launch`` on the master's place, and
writes the driver result (the application id) :meth:`SparkDriver.collect` reads; event logs,
listener, telemetry, faults and the record stay as they are. Hand it to the runner by its workload
name, as the kinds of :mod:`shufflelab.kinds` are.
"""

from __future__ import annotations

from collections.abc import Mapping

from shufflelab.emulate.drivers.base import Driver, Group, Phase, WorkloadDriver
from shufflelab.emulate.drivers.spark import SparkDriver, cc_in_ss
from shufflelab.spec import ExperimentSpec, SpecError

__all__ = [
    "SPARK_APPLICATIONS", "Driver", "Group", "Phase", "SparkDriver", "WorkloadDriver", "cc_in_ss", "kind_of",
]  # fmt: skip

# the workloads that are Spark applications and nothing more (:class:`SparkDriver` runs them)
SPARK_APPLICATIONS = frozenset({"sort-aggregate", "groupby-test", "small-records", "app"})


def kind_of(spec: ExperimentSpec, kinds: Mapping[str, type[Driver]]) -> type[Driver]:
    """The driver of ``spec``'s workload: its kind's own in ``kinds`` (workload name -> driver:
    :data:`shufflelab.kinds.DRIVERS`, handed to the runner), else :class:`SparkDriver` for a Spark
    application; a workload with neither is refused naming it."""
    name = spec.workload.name
    if name in kinds:
        return kinds[name]
    if name in SPARK_APPLICATIONS:
        return SparkDriver
    raise SpecError(
        f"workload.name = {name!r}: this runner was given no driver for it (it is handed the kinds' drivers, "
        "shufflelab.kinds.DRIVERS, by whoever builds it: shufflelab run and tune do)"
    )
