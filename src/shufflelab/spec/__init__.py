"""Experiment specifications: a typed, validated description of what to run, and its matrix.

An experiment file (TOML) describes one *base* scenario and an optional ``[matrix]`` of values to
vary; :func:`expand` turns it into concrete :class:`Scenario` objects. Everything here is pure:
no clock, no subprocess, no system state. Units are part of every field name (``rate_mbps``,
``queue_bytes``, ``delay_ms``, ``timeout_s``).

The package by job: :mod:`.base` (choices, the model base), :mod:`.network`, :mod:`.workload`,
:mod:`.experiment` (the models), :mod:`.loader` (reading TOML, errors, field paths) and
:mod:`.matrix` (dotted paths, the bound on points) -- both shared with the simulator's
specs -- and :mod:`.scenarios` (parse, load, expand, the scenario hash).
"""

from __future__ import annotations

from shufflelab.spec.base import (
    DCTCP_BASE as DCTCP_BASE,
)
from shufflelab.spec.base import (
    CongestionControl as CongestionControl,
)
from shufflelab.spec.base import (
    Datapath as Datapath,
)
from shufflelab.spec.base import (
    Role as Role,
)
from shufflelab.spec.base import (
    SwitchMode as SwitchMode,
)
from shufflelab.spec.experiment import (
    CrossTraffic as CrossTraffic,
)
from shufflelab.spec.experiment import (
    ExperimentMeta as ExperimentMeta,
)
from shufflelab.spec.experiment import (
    ExperimentSpec as ExperimentSpec,
)
from shufflelab.spec.experiment import (
    Fault as Fault,
)
from shufflelab.spec.experiment import (
    Telemetry as Telemetry,
)
from shufflelab.spec.loader import (
    MAX_NESTING as MAX_NESTING,
)
from shufflelab.spec.loader import (
    SpecError as SpecError,
)
from shufflelab.spec.loader import (
    check_nesting as check_nesting,
)
from shufflelab.spec.loader import (
    field_path as field_path,
)
from shufflelab.spec.loader import (
    read_toml as read_toml,
)
from shufflelab.spec.matrix import (
    MAX_SCENARIOS as MAX_SCENARIOS,
)
from shufflelab.spec.matrix import (
    PathError as PathError,
)
from shufflelab.spec.matrix import (
    set_path as set_path,
)
from shufflelab.spec.network import (
    Host as Host,
)
from shufflelab.spec.network import (
    Link as Link,
)
from shufflelab.spec.network import (
    Red as Red,
)
from shufflelab.spec.network import (
    Tcp as Tcp,
)
from shufflelab.spec.network import (
    TcpOverride as TcpOverride,
)
from shufflelab.spec.network import (
    Topology as Topology,
)
from shufflelab.spec.scenarios import (
    ONLY as ONLY,
)
from shufflelab.spec.scenarios import (
    Scenario as Scenario,
)
from shufflelab.spec.scenarios import (
    expand as expand,
)
from shufflelab.spec.scenarios import (
    load as load,
)
from shufflelab.spec.scenarios import (
    parse as parse,
)
from shufflelab.spec.scenarios import (
    resolve_app_files as resolve_app_files,
)
from shufflelab.spec.scenarios import (
    selected as selected,
)
from shufflelab.spec.scenarios import (
    spec_hash as spec_hash,
)
from shufflelab.spec.scenarios import (
    stored as stored,
)
from shufflelab.spec.workload import (
    APP_FIELDS as APP_FIELDS,
)
from shufflelab.spec.workload import (
    SPARK_LONG_MAX as SPARK_LONG_MAX,
)
from shufflelab.spec.workload import (
    SPARK_MAX_ARRAY as SPARK_MAX_ARRAY,
)
from shufflelab.spec.workload import (
    WORKLOAD_PARAMS as WORKLOAD_PARAMS,
)
from shufflelab.spec.workload import (
    AppParams as AppParams,
)
from shufflelab.spec.workload import (
    GroupByTestParams as GroupByTestParams,
)
from shufflelab.spec.workload import (
    MapReduceParams as MapReduceParams,
)
from shufflelab.spec.workload import (
    NdpPolicy as NdpPolicy,
)
from shufflelab.spec.workload import (
    SmallRecordsParams as SmallRecordsParams,
)
from shufflelab.spec.workload import (
    SortAggregateParams as SortAggregateParams,
)
from shufflelab.spec.workload import (
    Spark as Spark,
)
from shufflelab.spec.workload import (
    SparkConfKey as SparkConfKey,
)
from shufflelab.spec.workload import (
    SparkSeed as SparkSeed,
)
from shufflelab.spec.workload import (
    TpchParams as TpchParams,
)
from shufflelab.spec.workload import (
    TpchQuery as TpchQuery,
)
from shufflelab.spec.workload import (
    Workload as Workload,
)
from shufflelab.spec.workload import (
    WorkloadName as WorkloadName,
)

__all__ = [
    "APP_FIELDS",
    "AppParams",
    "resolve_app_files",
    "stored",
    "CongestionControl",
    "CrossTraffic",
    "DCTCP_BASE",
    "Datapath",
    "ExperimentMeta",
    "ExperimentSpec",
    "Fault",
    "GroupByTestParams",
    "Host",
    "Link",
    "MAX_NESTING",
    "MAX_SCENARIOS",
    "MapReduceParams",
    "NdpPolicy",
    "ONLY",
    "PathError",
    "Red",
    "Role",
    "SPARK_LONG_MAX",
    "SPARK_MAX_ARRAY",
    "Scenario",
    "SmallRecordsParams",
    "SortAggregateParams",
    "Spark",
    "SparkConfKey",
    "SparkSeed",
    "SpecError",
    "SwitchMode",
    "Tcp",
    "TcpOverride",
    "Telemetry",
    "Topology",
    "TpchParams",
    "TpchQuery",
    "WORKLOAD_PARAMS",
    "Workload",
    "WorkloadName",
    "check_nesting",
    "expand",
    "field_path",
    "load",
    "parse",
    "read_toml",
    "selected",
    "set_path",
    "spec_hash",
]
