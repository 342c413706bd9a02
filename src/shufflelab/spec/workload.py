"""The spec's Spark settings and workloads, with each workload's parameters."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from shufflelab import sparkconf
from shufflelab.spec.base import MEMORY_PATTERN, SpecModel


def _conf_key(key: str) -> str:
    if not key.startswith("spark."):
        raise ValueError(f"conf key {key!r} must start with 'spark.'")
    if not sparkconf.KEY.match(key):
        raise ValueError(f"conf key {key!r} has whitespace in it (Spark would never read it)")
    reason = sparkconf.reserved_reason(key)
    if reason is not None:
        raise ValueError(f"reserved: {reason}; the lab sets it for every application")
    return key


SparkConfKey = Annotated[str, AfterValidator(_conf_key)]


class Spark(SpecModel):
    worker_cores: int = Field(default=1, ge=1, le=64)
    worker_memory: str = "1g"
    executor_memory: str = "768m"
    driver_memory: str = "1g"
    shuffle_compress: bool = Field(default=False, description="Seed 000 disables it so every byte hits the wire.")
    conf: dict[SparkConfKey, str] = Field(
        default_factory=dict,
        description=(
            "Extra Spark conf for the application; wins over the lab's defaults. Keys the lab relies on "
            "(event log, listener, master, cores: shufflelab.sparkconf.RESERVED) are refused."
        ),
    )
    fast_jvm: bool = Field(
        default=False,
        description="C1-only JIT and serial GC: quicker tiny runs (tests), not for measurements.",
    )
    reuse_cluster: bool = Field(default=True, description="Keep master and workers up across runs that allow it.")
    listener: bool = Field(
        default=True,
        description="Attach shufflelab's task listener (per-task fetch progress from every heartbeat).",
    )
    cds: bool = Field(
        default=True,
        description="Start driver and executor JVMs from a class-data-sharing archive (faster start-up only).",
    )
    heartbeat_s: float = Field(
        default=1.0,
        ge=0.001,  # Spark gets whole milliseconds (listener.spark_conf): less would be a 0 ms heartbeat
        le=60,
        description="Executor heartbeat period: how often the listener sees fetch progress.",
    )

    @field_validator("worker_memory", "executor_memory", "driver_memory")
    @classmethod
    def _memory(cls, v: str) -> str:
        if not MEMORY_PATTERN.match(v):
            raise ValueError(f"{v!r} is not a Spark memory size like '512m' or '2g'")
        return v


SPARK_LONG_MAX = 2**63 - 1
"""Spark takes a Python int literal as a LongType: a workload's seeds, groups and keys must fit."""
SparkSeed = Annotated[int, Field(ge=-(2**63), le=SPARK_LONG_MAX - 1)]  # the workloads also use seed + 1
SPARK_MAX_ARRAY = 2**31 - 1 - 15
"""The most elements a Spark array holds (``ByteArrayMethods.MAX_ROUNDED_ARRAY_LENGTH``)."""

WorkloadName = Literal["sort-aggregate", "groupby-test", "small-records", "mapreduce", "tpch", "app"]
APP_FIELDS = ("script", "jar", "main_class", "args", "py_files", "conf")
"""The fields of ``[workload]`` that describe a user application (``name = "app"``)."""


class AppParams(SpecModel):
    """The user's own application: a PySpark script, or a jar and its main class, with arguments.

    It runs on the emulated cluster inside the session the lab creates (shufflelab.workloads.userapp);
    ``conf`` is applied like ``spark.conf`` (the keys the lab relies on are refused).
    """

    script: str | None = Field(default=None, description="A PySpark script (.py), relative to the spec file.")
    jar: str | None = Field(default=None, description="An application jar, relative to the spec file.")
    main_class: str | None = Field(default=None, description="The jar's main class (fully qualified).")
    args: list[str] = Field(default_factory=list, max_length=1000, description="The application's arguments.")
    py_files: list[str] = Field(default_factory=list, max_length=100, description="Python modules it imports.")
    conf: dict[SparkConfKey, str] = Field(default_factory=dict, description="Spark conf of this application.")

    @model_validator(mode="after")
    def _one_entry_point(self) -> AppParams:
        if (self.script is None) == (self.jar is None):
            raise ValueError("a user application ('app') needs exactly one of script = 'job.py' or jar = 'app.jar'")
        if self.script is not None and not self.script.endswith(".py"):
            raise ValueError(f"script {self.script!r}: give a PySpark script ending in .py (or use jar)")
        if self.jar is not None and not self.main_class:
            raise ValueError("jar needs main_class, the fully qualified class whose main() runs the application")
        if self.script is not None and self.main_class:
            raise ValueError("main_class goes with jar, not with script")
        return self


class Workload(SpecModel):
    name: WorkloadName = "sort-aggregate"
    params: dict[str, int | float | str | bool] = Field(default_factory=dict)
    apps: int = Field(
        default=1,
        ge=1,
        le=8,
        description="Identical applications run at the same time, the cluster's cores split evenly between them.",
    )
    script: str | None = Field(default=None, description="name = 'app': the PySpark script to run.")
    jar: str | None = Field(default=None, description="name = 'app': the application jar (with main_class).")
    main_class: str | None = Field(default=None, description="name = 'app': the jar's main class.")
    args: list[str] = Field(default_factory=list, description="name = 'app': the application's arguments.")
    py_files: list[str] = Field(default_factory=list, description="name = 'app': Python files it imports.")
    conf: dict[SparkConfKey, str] = Field(default_factory=dict, description="name = 'app': its Spark conf.")

    @model_validator(mode="after")
    def _app_fields(self) -> Workload:
        given = [f for f in APP_FIELDS if getattr(self, f)]
        if self.name != "app" and given:
            raise ValueError(f"{', '.join(given)}: only for a user application (workload.name = 'app')")
        if self.name == "app" and self.params:
            raise ValueError("a user application takes script/jar, args and conf, not params")
        return self

    def param_data(self) -> dict[str, Any]:
        """What ``WORKLOAD_PARAMS[name]`` validates: ``params``, or the application's fields for 'app'."""
        if self.name == "app":
            return {f: getattr(self, f) for f in APP_FIELDS}
        return dict(self.params)


class SortAggregateParams(SpecModel):
    """Seed 000's application: synthetic rows, orderBy, then groupBy + count."""

    rows: int = Field(ge=1, le=10_000_000_000)
    partitions: int = Field(ge=1, le=100_000)
    payload_bytes: int = Field(default=64, ge=0, le=100_000, description="Bytes of payload per row.")
    groups: int = Field(default=1000, ge=1, le=SPARK_LONG_MAX, description="Distinct values of the groupBy key.")
    seed: SparkSeed = 42


class GroupByTestParams(SpecModel):
    """Spark's GroupByTest example: random (int, bytes) pairs, cached, counted, groupByKey, counted."""

    mappers: int = Field(default=2, ge=1, le=100_000, description="numMappers (map partitions).")
    kv_pairs: int = Field(
        default=1000, ge=1, le=SPARK_MAX_ARRAY, description="numKVPairs per mapper (one Spark array each)."
    )
    value_bytes: int = Field(default=1000, ge=1, le=1_000_000, description="valSize: bytes per value.")
    reducers: int = Field(default=2, ge=1, le=100_000, description="numReducers.")
    seed: SparkSeed = 42

    @property
    def partitions(self) -> int:
        return self.reducers


class SmallRecordsParams(SpecModel):
    """Seed 001's network-heavy app: many small records and many small shuffle blocks."""

    records: int = Field(ge=1, le=10_000_000_000)
    partitions: int = Field(default=64, ge=1, le=100_000, description="Map and reduce partitions.")
    keys: int = Field(default=100_000, ge=1, le=SPARK_LONG_MAX, description="Distinct keys.")
    rounds: int = Field(default=2, ge=1, le=10, description="Shuffles in a row (groupBy, then repartition...).")
    seed: SparkSeed = 42


class MapReduceParams(SpecModel):
    """Seed 002's emulated MapReduce shuffle: a trace replayed by transfer agents on the hosts with
    role ``mapreduce`` (no Spark). The trace is a JSON file, or generated from these parameters."""

    trace: str | None = Field(default=None, description="A trace JSON file (shufflelab.mapreduce.trace).")
    generator: Literal["hadoop-sort", "synthetic"] = "hadoop-sort"
    mappers: int = Field(default=8, ge=1, le=10_000)
    reducers: int = Field(default=8, ge=1, le=10_000)
    input_mb_per_map: float = Field(default=8.0, gt=0, le=1e6, description="hadoop-sort: map input = output per map.")
    partition_mb: float = Field(default=1.0, gt=0, le=1e6, description="synthetic: mean bytes per (map, reducer).")
    dist: Literal["constant", "uniform", "lognormal"] = "lognormal"
    spread: float = Field(default=0.5, ge=0, le=5)
    map_s: float = Field(default=1.0, ge=0, le=86_400, description="synthetic: mean map duration.")
    reduce_s: float = Field(default=0.0, ge=0, le=86_400, description="synthetic: reduce compute after the shuffle.")
    parallel_copies: int = Field(default=5, ge=1, le=1000)
    placement: Literal["round-robin", "split"] = Field(
        default="split", description="split: maps on the first half of the hosts, reduces on the second."
    )
    seed: int = 1


NdpPolicy = Literal["none", "filter", "filter+project", "full", "net-aware"]
TpchQuery = Literal["q1", "q6", "q14", "q19"]


class TpchParams(SpecModel):
    """Seed 003's prototype: TPC-H queries over lineitem/part in HDFS on the hosts with role
    ``storage``, read by Spark through shufflelab's NDP connector, which pushes the ``policy``'s
    prefix of filter / project / partial aggregate to the storage hosts' NDP proxies."""

    query: TpchQuery | Literal["mix"] = Field(
        default="q6", description="The query; 'mix' cycles q1, q6, q14, q19 through a stream."
    )
    policy: NdpPolicy = Field(default="net-aware", description="What the connector may push down.")
    queries: int = Field(default=1, ge=1, le=100, description="1: a single query; more: a stream of queries.")
    interval_s: float = Field(default=10.0, ge=0, le=3600, description="Arrival spacing of the stream's queries.")
    scale_factor: float = Field(default=0.1, gt=0, le=10, description="TPC-H scale factor (tpchgen-cli).")
    file_mb: int = Field(default=16, ge=1, le=256, description="Size of each Parquet file (one HDFS block each).")
    block_mb: int = Field(default=32, ge=1, le=1024, description="HDFS block size; file_mb must fit in it.")
    storage_cores: float = Field(default=1, gt=0, le=64, description="Emulated cores of each storage host.")
    core_scale: float = Field(
        default=0.25,
        gt=0,
        le=1,
        description="Real CPU per emulated core (this machine has two): storage hosts get storage_cores × this.",
    )

    @model_validator(mode="after")
    def _blocks(self) -> TpchParams:
        if self.file_mb > self.block_mb:
            raise ValueError(f"file_mb ({self.file_mb}) must fit in one block (block_mb = {self.block_mb})")
        return self


WORKLOAD_PARAMS: dict[str, type[SpecModel]] = {
    "tpch": TpchParams,
    "sort-aggregate": SortAggregateParams,
    "groupby-test": GroupByTestParams,
    "small-records": SmallRecordsParams,
    "mapreduce": MapReduceParams,
    "app": AppParams,
}
