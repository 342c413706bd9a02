"""The workload kinds that put a package of their own to work on a fabric: TPC-H through near-data
processing (:class:`TpchDriver`, :mod:`shufflelab.ndp`) and the MapReduce shuffle replay
(:class:`ReplayDriver`, :mod:`shufflelab.mapreduce`).

Their drivers follow the runner's driver protocol (:mod:`shufflelab.emulate.drivers`) and sit above
both the backends and the packages they run: the backends cannot name ``ndp/`` or ``mapreduce/``,
and those packages cannot import the drivers. The runner is handed :data:`DRIVERS` by whoever
builds it (the CLI's ``run`` and ``tune``), and finds a run's driver there by the spec's workload
name, as :func:`shufflelab.emulate.drivers.kind_of` says.
"""

from __future__ import annotations

from collections.abc import Mapping

from shufflelab.emulate.drivers import Driver
from shufflelab.kinds.mapreduce import ReplayDriver
from shufflelab.kinds.tpch import TpchDriver

__all__ = ["DRIVERS", "ReplayDriver", "TpchDriver"]

# workload name -> the driver of its kind (every other workload is a Spark application)
DRIVERS: Mapping[str, type[Driver]] = {"mapreduce": ReplayDriver, "tpch": TpchDriver}
