"""Data-center fabric specs: a topology, a raw all-to-all shuffle or a traffic matrix, cross traffic
and link failures.

A TOML file with a ``[topology]`` table is a fabric spec (``shufflelab sim run`` tells the two
kinds apart by it). Pure: no clock, no system state, except reading the files a spec names (a
graph, a size trace), relative to the spec and bounded in size. Units are in every field name;
``gbps`` is 10^9 bit/s, ``mib`` is 2^20 bytes, ``us`` microseconds. :func:`core_config` turns one
matrix point into the Rust core's JSON (``crates/simcore/src/fabric.rs``).

The workload is a ``[shuffle]`` (M map tasks × R reducers, every reducer fetching one block from
every map task) or a ``[traffic]`` matrix: ``kind = "random"`` (each receiver fetches from ``k``
distinct random senders, never itself, or each sender sends to ``k`` distinct random receivers;
seeded) or ``kind = "file"`` (one fetch per row of a CSV or Parquet table ``src,dst,bytes``, see
:func:`read_matrix`). Every receiving host runs one fetching task that requests its rows through
the fetch window.
"""

from __future__ import annotations

import csv
import itertools
import math
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from shufflelab.sim.spec import SimSpecError
from shufflelab.sim.tcp_spec import Tcp, check_tcp
from shufflelab.spec import check_nesting, field_path, read_toml
from shufflelab.spec.matrix import point_documents

MIB = 2**20
MAX_HOSTS = 20_000
"""The most hosts of a fabric (the core's tables grow with hosts × switches)."""
MAX_FETCHES = 2_000_000
"""The most fetches (maps × reducers) of one run: the core keeps each one's FCT (16 bytes)."""
MAX_FILE_BYTES = 64 * MIB
"""The largest graph or trace file a spec may name."""
MAX_TRACE_SIZES = 1_000_000
MAX_GRAPH_LINKS = 500_000

Gbps = Annotated[float, Field(gt=0, le=100_000, description="Gbit/s")]
DelayUs = Annotated[float, Field(ge=0, le=1_000_000, description="one-way delay, microseconds")]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class LeafSpine(_Model):
    kind: Literal["leaf_spine"]
    leaves: int = Field(ge=1, le=10_000)
    hosts_per_leaf: int = Field(ge=1, le=10_000)
    spines: int = Field(ge=1, le=1_000)
    host_gbps: Gbps
    uplink_gbps: Gbps | None = Field(default=None, description="Each leaf-spine link (or give oversubscription).")
    oversubscription: float | None = Field(
        default=None, gt=0, le=1000, description="hosts_per_leaf × host_gbps / (spines × uplink_gbps)."
    )
    host_delay_us: DelayUs = 1.0
    uplink_delay_us: DelayUs = 1.0

    @model_validator(mode="after")
    def _one_uplink(self) -> LeafSpine:
        if (self.uplink_gbps is None) == (self.oversubscription is None):
            raise ValueError("give exactly one of uplink_gbps and oversubscription")
        if self.leaves * self.hosts_per_leaf > MAX_HOSTS:
            raise ValueError(f"{self.leaves * self.hosts_per_leaf:,} hosts, more than {MAX_HOSTS:,}")
        return self

    def uplink(self) -> float:
        if self.uplink_gbps is not None:
            return self.uplink_gbps
        assert self.oversubscription is not None
        return self.hosts_per_leaf * self.host_gbps / (self.spines * self.oversubscription)

    def ratio(self) -> float:
        return self.hosts_per_leaf * self.host_gbps / (self.spines * self.uplink())

    def hosts(self) -> int:
        return self.leaves * self.hosts_per_leaf


class FatTree(_Model):
    kind: Literal["fat_tree"]
    k: int = Field(ge=2, le=42, description="Ports per switch (even): k³/4 hosts.")
    host_gbps: Gbps
    oversubscription: float = Field(
        default=1.0, gt=0, le=1000, description="At the edge: host_gbps / edge_agg_gbps (when those are absent)."
    )
    edge_agg_gbps: Gbps | None = None
    agg_core_gbps: Gbps | None = None
    host_delay_us: DelayUs = 1.0
    edge_agg_delay_us: DelayUs = 1.0
    agg_core_delay_us: DelayUs = 1.0

    @model_validator(mode="after")
    def _even(self) -> FatTree:
        if self.k % 2:
            raise ValueError(f"k must be even, got {self.k}")
        return self

    def tier_gbps(self) -> tuple[float, float]:
        base = self.host_gbps / self.oversubscription
        return (self.edge_agg_gbps or base, self.agg_core_gbps or base)

    def ratio(self) -> float:
        return self.host_gbps / self.tier_gbps()[0]

    def hosts(self) -> int:
        return self.k**3 // 4


class GraphFile(_Model):
    kind: Literal["graph"]
    file: str = Field(
        min_length=1,
        description="CSV a,b,gbps,delay_us,tier per cable; nodes whose name starts with 'h' followed by "
        "digits are hosts (relative to the spec).",
    )


Topology = Annotated[LeafSpine | FatTree | GraphFile, Field(discriminator="kind")]


class Constant(_Model):
    kind: Literal["constant"]
    mib: float = Field(gt=0, le=1e6)


class Lognormal(_Model):
    kind: Literal["lognormal"]
    mean_mib: float = Field(gt=0, le=1e6)
    sigma: float = Field(ge=0, le=5, description="σ of the underlying normal.")


class Empirical(_Model):
    kind: Literal["empirical"]
    file: str = Field(min_length=1, description="One block size in bytes per line (or a CSV's first column).")


Sizes = Annotated[Constant | Lognormal | Empirical, Field(discriminator="kind")]


class Shuffle(_Model):
    maps: int = Field(ge=1, le=MAX_FETCHES)
    reducers: int = Field(ge=1, le=MAX_FETCHES)
    size: Sizes
    max_reqs_in_flight: int | None = Field(
        default=None, ge=1, le=2**31 - 1, description="spark.reducer.maxReqsInFlight (absent: unbounded)."
    )
    max_mib_in_flight: float = Field(default=48, gt=0, le=1e9, description="spark.reducer.maxSizeInFlight.")

    @model_validator(mode="after")
    def _bounded(self) -> Shuffle:
        if self.maps * self.reducers > MAX_FETCHES:
            raise ValueError(f"maps × reducers = {self.maps * self.reducers:,} fetches, more than {MAX_FETCHES:,}")
        return self


class RandomTraffic(_Model):
    """Each receiver fetches from ``k`` distinct senders (or each sender sends to ``k`` distinct
    receivers), drawn at random without the host itself; seeded."""

    kind: Literal["random"]
    k: int = Field(ge=1, le=MAX_HOSTS, description="Distinct peers per host (never the host itself).")
    per: Literal["receiver", "sender"] = Field(
        default="receiver",
        description="receiver: each receiver fetches from k senders; sender: each sender sends to k receivers.",
    )
    senders: int | None = Field(
        default=None, ge=1, le=MAX_HOSTS, description="How many hosts send, drawn at random (absent: every host)."
    )
    receivers: int | None = Field(
        default=None, ge=1, le=MAX_HOSTS, description="How many hosts receive, drawn at random (absent: every host)."
    )
    size: Sizes
    seed: int | None = Field(
        default=None, ge=0, le=2**63 - 1, description="The matrix's seed (absent: the run's, a new matrix per seed)."
    )
    max_reqs_in_flight: int | None = Field(default=None, ge=1, le=2**31 - 1)
    max_mib_in_flight: float = Field(default=48, gt=0, le=1e9)

    @model_validator(mode="after")
    def _feasible(self) -> RandomTraffic:
        pool, name = (self.senders, "senders") if self.per == "receiver" else (self.receivers, "receivers")
        if pool is not None and self.k > pool - 1:
            raise ValueError(
                f"k = {self.k} distinct peers need at least {self.k + 1} {name} (a host is never its own peer), "
                f"got {pool}"
            )
        return self


class FileTraffic(_Model):
    """One fetch per row of a table ``src,dst,bytes`` (:func:`read_matrix`)."""

    kind: Literal["file"]
    file: str = Field(min_length=1, description="CSV or Parquet with columns src, dst, bytes (relative to the spec).")
    format: Literal["csv", "parquet"] | None = Field(default=None, description="Absent: from the file's extension.")
    max_reqs_in_flight: int | None = Field(default=None, ge=1, le=2**31 - 1)
    max_mib_in_flight: float = Field(default=48, gt=0, le=1e9)


Traffic = Annotated[RandomTraffic | FileTraffic, Field(discriminator="kind")]


class Hosts(_Model):
    cores: int = Field(default=1, ge=1, le=1024, description="Reduce tasks a host runs at once.")


class Cross(_Model):
    kind: Literal["udp", "tcp"]
    src: int = Field(ge=0, description="Host index.")
    dst: int = Field(ge=0, description="Host index.")
    gbps: float | None = Field(default=None, gt=0, le=100_000, description="UDP's constant rate.")
    udp_mode: Literal["priority", "fair"] = Field(
        default="priority", description="priority: takes its share first; fair: a flow capped at its rate."
    )
    start_s: float = Field(default=0, ge=0, le=1e7)
    stop_s: float | None = Field(default=None, ge=0, le=1e7)
    mib: float | None = Field(default=None, gt=0, le=1e9, description="TCP: size (absent: endless).")

    @model_validator(mode="after")
    def _consistent(self) -> Cross:
        if self.kind == "udp" and self.gbps is None:
            raise ValueError("UDP cross traffic needs gbps")
        if self.kind == "tcp" and self.gbps is not None:
            raise ValueError("TCP cross traffic is elastic: give mib (or nothing), not gbps")
        if self.src == self.dst:
            raise ValueError("src and dst must differ")
        if self.stop_s is not None and self.stop_s < self.start_s:
            raise ValueError("stop_s must be >= start_s")
        return self


class Failure(_Model):
    a: str = Field(min_length=1, description="Node name, e.g. leaf0, spine1, edge0.1, agg2.0, core3, h5.")
    b: str = Field(min_length=1)
    down_s: float = Field(ge=0, le=1e7)
    up_s: float | None = Field(default=None, ge=0, le=1e7)

    @model_validator(mode="after")
    def _order(self) -> Failure:
        if self.up_s is not None and self.up_s < self.down_s:
            raise ValueError("up_s must be >= down_s")
        return self


class Output(_Model):
    fct_buckets_mib: list[float] = Field(default=[0.1, 1, 10, 100], max_length=64)
    heatmap_bins: int = Field(default=60, ge=1, le=10_000)

    @model_validator(mode="after")
    def _increasing(self) -> Output:
        b = self.fct_buckets_mib
        if any(x <= 0 for x in b) or any(y <= x for x, y in itertools.pairwise(b)):
            raise ValueError("fct_buckets_mib must be positive and increasing")
        return self


class Packet(_Model):
    """Options of ``mode = "packet"`` (the max-min mode ignores them, so a matrix may vary ``mode``)."""

    cluster: bool = Field(
        default=False,
        description="Simulate one link per cluster of links whose workloads are alike (same capacity, UDP rate "
        "and queue; fetch count, size, start, round-trip and entry-rate distributions within cluster_tolerance); "
        "the others take their representative's delays per fetch (design-sim.md, Packet-faithful mode).",
    )
    cluster_tolerance: float = Field(
        default=0.05,
        ge=0,
        le=0.5,
        description="How far two links' workloads may differ and still be alike: relative difference of the "
        "fetch counts, and WMAPE of each distribution's 100 quantiles (0: identical workloads only; used with "
        "cluster = true).",
    )


class Experiment(_Model):
    name: str = Field(pattern=r"^sim-[a-z0-9-]+$", description="Experiment name (sim-...).")
    description: str = ""
    seeds: int = Field(default=1, ge=1, le=100)
    recompute: Literal["incremental", "level_cut", "components", "full"] = Field(
        default="incremental",
        description="Max-min recomputation: local repair (the flows a change reaches through the bottlenecks, "
        "grown until every flow has one), every flow at or above the level a change reaches, changed components "
        "however large, or every flow.",
    )


class FabricSpec(_Model):
    experiment: Experiment
    topology: Topology
    hosts: Hosts = Hosts()
    shuffle: Shuffle | None = None
    traffic: Traffic | None = Field(default=None, description="A traffic matrix instead of the all-to-all shuffle.")
    cross: list[Cross] = Field(default_factory=list, max_length=10_000)
    failures: list[Failure] = Field(default_factory=list, max_length=10_000)
    tcp: Tcp | None = Field(default=None, description="Congestion control of every TCP flow (tcp_spec).")
    mode: Literal["maxmin", "packet"] = Field(
        default="maxmin",
        description="maxmin: flow level, the fast mode; packet: the max-min schedule's fetches re-timed by a "
        "packet-level simulation of every saturated link (slow start, losses, timeouts, marking; needs [tcp]).",
    )
    packet: Packet = Packet()
    output: Output = Output()
    matrix: dict[str, list[Any]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_workload(self) -> FabricSpec:
        if (self.shuffle is None) == (self.traffic is None):
            raise ValueError("give exactly one workload: a [shuffle] (all-to-all) or a [traffic] matrix")
        return self


class Point(_Model):
    """One matrix point: its label, varied values and the full spec."""

    label: str
    values: dict[str, Any]
    spec: FabricSpec


TOPOLOGY_KINDS = ("leaf_spine", "fat_tree", "graph")
_TAGS = {"topology": TOPOLOGY_KINDS, "size": ("constant", "lognormal", "empirical"), "traffic": ("random", "file")}


def is_fabric(data: dict[str, Any]) -> bool:
    """Whether a spec document is a fabric spec: a shuffle, or a fabric topology (without the
    ``[[app]]`` tables of an application spec, :mod:`shufflelab.sim.app_spec`)."""
    topology = data.get("topology")
    if "app" in data:
        return False
    return (
        "shuffle" in data
        or "traffic" in data
        or (isinstance(topology, dict) and topology.get("kind") in TOPOLOGY_KINDS)
    )


def _loc(loc: tuple[Any, ...]) -> str:
    # a discriminated union puts its tag in the location (topology.fat_tree.k): drop it
    parts = [p for i, p in enumerate(loc) if not (i and p in _TAGS.get(str(loc[i - 1]), ()))]
    return field_path(parts) or "(top level)"


def _errors(where: str, err: ValidationError) -> str:
    return "\n".join(f"{where}: {_loc(tuple(e['loc']))}: {e['msg']}" for e in err.errors())


def parse(data: dict[str, Any], where: str = "<spec>") -> FabricSpec:
    check_nesting(data, where, SimSpecError)
    try:
        spec = FabricSpec.model_validate(data)
    except ValidationError as err:
        raise SimSpecError(_errors(where, err)) from None
    check_tcp(spec.tcp, where)
    check_mode(spec, where)
    check_traffic(spec, where)
    expand(spec, where)
    return spec


def check_traffic(spec: FabricSpec, where: str) -> None:
    """A random matrix's host counts against the topology's hosts (known without reading files)."""
    t = spec.traffic
    if not isinstance(t, RandomTraffic) or isinstance(spec.topology, GraphFile):
        return
    hosts = spec.topology.hosts()
    for name in ("senders", "receivers"):
        n = getattr(t, name)
        if n is not None and n > hosts:
            raise SimSpecError(f"{where}: traffic.{name}: {n:,} hosts, the topology has {hosts:,}")
    pool = (t.senders if t.per == "receiver" else t.receivers) or hosts
    if t.k > pool - 1:
        raise SimSpecError(
            f"{where}: traffic.k: {t.k} distinct peers need at least {t.k + 1} hosts to draw from, "
            f"the topology has {hosts:,}"
        )
    pickers = (t.receivers if t.per == "receiver" else t.senders) or hosts
    if pickers * t.k > MAX_FETCHES:
        raise SimSpecError(f"{where}: traffic: {pickers:,} × k = {pickers * t.k:,} fetches, more than {MAX_FETCHES:,}")


def check_mode(spec: FabricSpec, where: str) -> None:
    if spec.mode == "packet" and spec.tcp is None:
        raise SimSpecError(
            f"{where}: mode: 'packet' needs a [tcp] table (the congestion control and queues to simulate)"
        )
    if spec.tcp is not None and spec.tcp.path_acks:
        raise SimSpecError(
            f"{where}: tcp.path_acks: the applications' packet mode only (on a fabric's replayed schedule its "
            "passes with the queues of the pass before do not settle: docs/design-sim.md)"
        )


def load(path: str | Path) -> FabricSpec:
    return parse(read_toml(path, SimSpecError), str(path))


def expand(spec: FabricSpec, where: str = "<spec>") -> list[Point]:
    """The matrix's cartesian product in file order (the base scenario without a matrix); every
    point is validated, naming its values in errors."""
    base = spec.model_dump(mode="json", exclude_none=True)
    base["matrix"] = {}
    out = []
    for values, doc in point_documents(spec.matrix, base, where, SimSpecError, create=False):
        shown = ", ".join(f"{k}={v}" for k, v in values.items())
        try:
            point = FabricSpec.model_validate(doc)
        except ValidationError as err:
            raise SimSpecError(_errors(f"{where} [{shown}]", err)) from None
        check_tcp(point.tcp, f"{where} [{shown}]")
        check_mode(point, f"{where} [{shown}]")
        check_traffic(point, f"{where} [{shown}]")
        out.append(Point(label=shown or "base", values=values, spec=point))
    return out


def _read_small(path: Path, field: str) -> str:
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise SimSpecError(f"{field}: {path}: {size:,} bytes, more than {MAX_FILE_BYTES:,}")
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SimSpecError(f"{field}: {path}: cannot read: {(exc.strerror or str(exc)).lower()}") from None
    except UnicodeDecodeError:
        raise SimSpecError(f"{field}: {path}: not UTF-8 text") from None


def read_trace(path: Path) -> list[float]:
    """Block sizes (bytes) from a trace: one per line, or the first column of a CSV (a header
    line that is not a number is skipped)."""
    sizes: list[float] = []
    for i, row in enumerate(csv.reader(_read_small(path, "shuffle.size.file").splitlines()), start=1):
        if not row or not row[0].strip() or row[0].lstrip().startswith("#"):
            continue
        try:
            b = float(row[0])
        except ValueError:
            if i == 1:
                continue  # a header
            raise SimSpecError(f"shuffle.size.file: {path}: line {i}: {row[0]!r} is not a size in bytes") from None
        if not (0 < b <= 1e15):
            raise SimSpecError(f"shuffle.size.file: {path}: line {i}: size {b} is not in (0, 1e15] bytes")
        sizes.append(b)
        if len(sizes) > MAX_TRACE_SIZES:
            raise SimSpecError(f"shuffle.size.file: {path}: more than {MAX_TRACE_SIZES:,} sizes")
    if not sizes:
        raise SimSpecError(f"shuffle.size.file: {path}: no sizes")
    return sizes


Matrix = tuple[np.ndarray, np.ndarray, np.ndarray]
"""A traffic matrix as three columns: source host, destination host, bytes (one row per fetch)."""


def _draw_sizes(size: Constant | Lognormal | Empirical, n: int, rng: np.random.Generator, base_dir: Path) -> np.ndarray:
    if isinstance(size, Constant):
        return np.full(n, size.mib * MIB)
    if isinstance(size, Lognormal):
        mu = math.log(size.mean_mib * MIB) - size.sigma**2 / 2
        return np.clip(rng.lognormal(mu, size.sigma, n), 1.0, 1e15)
    trace = np.asarray(read_trace(base_dir / size.file))
    return trace[rng.integers(0, len(trace), n)]


def random_matrix(hosts: int, t: RandomTraffic, seed: int, base_dir: Path = Path(".")) -> Matrix:
    """The random matrix of ``t`` on ``hosts`` hosts, drawn from ``t.seed`` (else ``seed``) with
    numpy's PCG64: the sender and receiver sets (every host when absent, else that many distinct
    hosts at random), then per receiver in host order ``k`` distinct senders other than itself
    (``per = "sender"``: per sender ``k`` receivers), then the sizes, one per row. Rows are grouped
    by the host that picked them."""
    where = "traffic"
    pool_n = t.senders if t.per == "receiver" else t.receivers
    if (t.senders or hosts) > hosts or (t.receivers or hosts) > hosts:
        raise SimSpecError(f"{where}: senders and receivers must be at most the topology's {hosts:,} hosts")
    if t.k > (pool_n or hosts) - 1:
        raise SimSpecError(f"{where}.k: {t.k} distinct peers need at least {t.k + 1} hosts to draw from")
    rng = np.random.default_rng(t.seed if t.seed is not None else seed)

    def some(n: int | None) -> np.ndarray:
        if n is None or n == hosts:
            return np.arange(hosts, dtype=np.int64)
        return np.sort(rng.choice(hosts, n, replace=False))

    senders, receivers = some(t.senders), some(t.receivers)
    pickers, pool = (receivers, senders) if t.per == "receiver" else (senders, receivers)
    peers = np.empty((len(pickers), t.k), dtype=np.int64)
    for i, h in enumerate(pickers):
        pos = int(np.searchsorted(pool, h))
        inside = pos < len(pool) and pool[pos] == h
        idx = rng.choice(len(pool) - int(inside), t.k, replace=False)
        if inside:
            idx[idx >= pos] += 1  # skip the host itself: uniform over the others
        peers[i] = pool[idx]
    own = np.repeat(pickers, t.k)
    other = peers.reshape(-1)
    src, dst = (other, own) if t.per == "receiver" else (own, other)
    return src, dst, _draw_sizes(t.size, len(src), rng, base_dir)


def _matrix_format(path: Path, fmt: str | None) -> str:
    if fmt is not None:
        return fmt
    suffix = path.suffix.lower()
    if suffix in (".csv", ".parquet"):
        return suffix[1:]
    raise SimSpecError(
        f"traffic.file: {path}: cannot tell the format from the extension {suffix or '(none)'!r}: "
        "name it .csv or .parquet, or give traffic.format"
    )


def _host_field(value: Any, row: int, field: str, where: str) -> int:
    text = str(value).strip()
    try:
        f = float(text)
    except ValueError:
        f = math.nan
    if not (math.isfinite(f) and f == int(f) and f >= 0):
        raise SimSpecError(f"{where}: row {row}: field {field!r}: {text!r} is not a host index (an integer >= 0)")
    return int(f)


def _bytes_field(value: Any, row: int, where: str) -> float:
    text = str(value).strip()
    try:
        b = float(text)
    except ValueError:
        raise SimSpecError(f"{where}: row {row}: field 'bytes': {text!r} is not a number of bytes") from None
    if not (0 < b <= 1e15):
        raise SimSpecError(f"{where}: row {row}: field 'bytes': {text} is not in (0, 1e15] bytes")
    return b


def read_matrix(path: Path, fmt: str | None = None) -> Matrix:
    """A traffic matrix from a file, one fetch per row.

    Format: **CSV** (UTF-8, comma-separated, a header line naming the columns ``src``, ``dst`` and
    ``bytes`` in any order; further columns are ignored; lines starting with ``#`` are comments) or
    **Parquet** (columns ``src``, ``dst``, ``bytes``). ``src`` and ``dst`` are host indices (0 = the
    topology's first host, ``h0`` of a graph), integers; ``bytes`` a number in (0, 1e15]. A row whose
    ``src`` is its ``dst`` is refused: a host's own blocks do not cross the network. Errors name the
    file, the data row (1 = the first after the header) and the field."""
    where = f"traffic.file: {path}"
    kind = _matrix_format(path, fmt)
    rows: list[tuple[Any, Any, Any]]
    if kind == "csv":
        lines = [line for line in _read_small(path, "traffic.file").splitlines() if not line.lstrip().startswith("#")]
        reader = csv.reader(line for line in lines if line.strip())
        header = [h.strip().lower() for h in next(reader, [])]
        missing = [c for c in ("src", "dst", "bytes") if c not in header]
        if missing:
            raise SimSpecError(
                f"{where}: the header line must name the columns src, dst, bytes (missing: {', '.join(missing)}; "
                f"got {','.join(header) or 'an empty file'})"
            )
        cols = [header.index(c) for c in ("src", "dst", "bytes")]
        rows = []
        for i, rec in enumerate(reader, start=1):
            if len(rec) < len(header):
                raise SimSpecError(f"{where}: row {i}: {len(rec)} fields, the header has {len(header)}")
            rows.append((rec[cols[0]], rec[cols[1]], rec[cols[2]]))
            if len(rows) > MAX_FETCHES:
                raise SimSpecError(f"{where}: more than {MAX_FETCHES:,} rows")
    else:
        import duckdb  # the project's store; reads Parquet without another dependency

        try:
            size = path.stat().st_size
        except OSError as exc:
            raise SimSpecError(f"{where}: cannot read: {(exc.strerror or str(exc)).lower()}") from None
        if size > MAX_FILE_BYTES:
            raise SimSpecError(f"{where}: {size:,} bytes, more than {MAX_FILE_BYTES:,}")
        try:
            rel = duckdb.sql("SELECT * FROM read_parquet(?)", params=[str(path)])
            names = [c.lower() for c in rel.columns]
            missing = [c for c in ("src", "dst", "bytes") if c not in names]
            if missing:
                raise SimSpecError(
                    f"{where}: the Parquet file must have the columns src, dst, bytes (missing: {', '.join(missing)}; "
                    f"got {', '.join(rel.columns)})"
                )
            n = rel.aggregate("count(*)").fetchone()
            if n is not None and int(n[0]) > MAX_FETCHES:
                raise SimSpecError(f"{where}: more than {MAX_FETCHES:,} rows")
            got = [rel.columns[names.index(c)] for c in ("src", "dst", "bytes")]
            rows = rel.project(", ".join(f'"{c}"' for c in got)).fetchall()
        except duckdb.Error as err:
            raise SimSpecError(f"{where}: not a readable Parquet file ({err})") from None
    if not rows:
        raise SimSpecError(f"{where}: no rows (one fetch per row: src,dst,bytes)")
    src = np.empty(len(rows), dtype=np.int64)
    dst = np.empty(len(rows), dtype=np.int64)
    size_b = np.empty(len(rows))
    for i, (a, b, c) in enumerate(rows):
        src[i] = _host_field(a, i + 1, "src", where)
        dst[i] = _host_field(b, i + 1, "dst", where)
        size_b[i] = _bytes_field(c, i + 1, where)
        if src[i] == dst[i]:
            raise SimSpecError(
                f"{where}: row {i + 1}: src and dst are the same host ({src[i]}): a host's own blocks do not "
                "cross the network; leave the row out"
            )
    return src, dst, size_b


def traffic_matrix(spec: FabricSpec, hosts: int, seed: int, base_dir: Path) -> Matrix:
    """The matrix of a ``[traffic]`` spec on ``hosts`` hosts for run seed ``seed``, every row's hosts
    checked against the topology."""
    t = spec.traffic
    assert t is not None
    if isinstance(t, RandomTraffic):
        return random_matrix(hosts, t, seed, base_dir)
    path = base_dir / t.file
    src, dst, size_b = read_matrix(path, t.format)
    for name, col in (("src", src), ("dst", dst)):
        bad = np.flatnonzero(col >= hosts)
        if bad.size:
            i = int(bad[0])
            raise SimSpecError(
                f"traffic.file: {path}: row {i + 1}: field {name!r}: host {int(col[i])} is not a host of the "
                f"topology (0 to {hosts - 1})"
            )
    return src, dst, size_b


def read_graph(path: Path) -> dict[str, Any]:
    """A graph topology from a CSV of cables ``a,b,gbps,delay_us,tier`` (header optional)."""
    nodes: dict[str, bool] = {}
    links = []
    for i, row in enumerate(csv.reader(_read_small(path, "topology.file").splitlines()), start=1):
        if not row or row[0].lstrip().startswith("#"):
            continue
        if i == 1 and row[0].strip() == "a":
            continue
        if len(row) != 5:
            raise SimSpecError(f"topology.file: {path}: line {i}: want a,b,gbps,delay_us,tier, got {len(row)} fields")
        a, b, tier = row[0].strip(), row[1].strip(), row[4].strip()
        try:
            gbps, delay = float(row[2]), float(row[3])
        except ValueError:
            raise SimSpecError(f"topology.file: {path}: line {i}: gbps and delay_us must be numbers") from None
        if not (0 < gbps <= 100_000 and 0 <= delay <= 1e6) or not (a and b and tier) or a == b:
            raise SimSpecError(
                f"topology.file: {path}: line {i}: needs two different nodes, a tier, "
                "0 < gbps <= 100000 and 0 <= delay_us <= 1e6"
            )
        for n in (a, b):
            nodes.setdefault(n, n[:1] == "h" and n[1:].isdigit())
        links.append({"a": a, "b": b, "bytes_per_s": gbps * 1e9 / 8, "delay_s": delay * 1e-6, "tier": tier})
        if len(links) > MAX_GRAPH_LINKS:
            raise SimSpecError(f"topology.file: {path}: more than {MAX_GRAPH_LINKS:,} links")
    hosts = sorted((n for n, h in nodes.items() if h), key=lambda n: int(n[1:]))
    if not hosts:
        raise SimSpecError(f"topology.file: {path}: no host (nodes named h0, h1, ...)")
    if len(hosts) > MAX_HOSTS:
        raise SimSpecError(f"topology.file: {path}: {len(hosts):,} hosts, more than {MAX_HOSTS:,}")
    order = hosts + [n for n, h in nodes.items() if not h]
    return {"kind": "graph", "nodes": [{"name": n, "host": nodes[n]} for n in order], "links": links}


def describe_workload(spec: FabricSpec) -> str:
    """The workload in words (for the report)."""
    t = spec.traffic
    if t is None:
        assert spec.shuffle is not None
        return (
            f"all-to-all shuffle: {spec.shuffle.maps:,} map tasks × {spec.shuffle.reducers:,} reducers, "
            f"at most {spec.hosts.cores} reduce task(s) per host at a time"
        )
    if isinstance(t, FileTraffic):
        return f"traffic matrix from {t.file} (one fetch per row); one fetching task per receiving host"
    pick = (
        f"each receiver fetches from {t.k} distinct random senders"
        if t.per == "receiver"
        else f"each sender sends to {t.k} distinct random receivers"
    )
    who = (
        f"{'every host' if t.senders is None else f'{t.senders:,} random hosts'} send, "
        f"{'every host' if t.receivers is None else f'{t.receivers:,} random hosts'} receive"
    )
    seed = "the run's seed" if t.seed is None else f"seed {t.seed}"
    return f"random traffic matrix: {who}; {pick} (never itself; drawn from {seed}); one fetching task per receiver"


def host_count(spec: FabricSpec, base_dir: Path) -> int:
    t = spec.topology
    if isinstance(t, GraphFile):
        return sum(1 for n in read_graph(base_dir / t.file)["nodes"] if n["host"])
    return t.hosts()


def oversubscription(spec: FabricSpec) -> float | None:
    t = spec.topology
    return None if isinstance(t, GraphFile) else t.ratio()


def core_topology(t: LeafSpine | FatTree | GraphFile, base_dir: Path) -> dict[str, Any]:
    """The Rust core's topology document (``crates/simcore/src/topology.rs``)."""
    bps = 1e9 / 8
    topology: dict[str, Any]
    if isinstance(t, LeafSpine):
        topology = {
            "kind": "leaf_spine",
            "leaves": t.leaves,
            "hosts_per_leaf": t.hosts_per_leaf,
            "spines": t.spines,
            "host_bytes_per_s": t.host_gbps * bps,
            "uplink_bytes_per_s": t.uplink() * bps,
            "host_delay_s": t.host_delay_us * 1e-6,
            "uplink_delay_s": t.uplink_delay_us * 1e-6,
        }
    elif isinstance(t, FatTree):
        ea, ac = t.tier_gbps()
        topology = {
            "kind": "fat_tree",
            "k": t.k,
            "host_bytes_per_s": t.host_gbps * bps,
            "edge_agg_bytes_per_s": ea * bps,
            "agg_core_bytes_per_s": ac * bps,
            "host_delay_s": t.host_delay_us * 1e-6,
            "edge_agg_delay_s": t.edge_agg_delay_us * 1e-6,
            "agg_core_delay_s": t.agg_core_delay_us * 1e-6,
        }
    else:
        topology = read_graph(base_dir / t.file)
    return topology


def core_config(spec: FabricSpec, seed: int, base_dir: Path, *, recompute: str | None = None) -> dict[str, Any]:
    """The Rust core's fabric configuration for one matrix point and seed."""
    t = spec.topology
    bps = 1e9 / 8
    topology = core_topology(t, base_dir)
    hosts = sum(1 for n in topology["nodes"] if n["host"]) if isinstance(t, GraphFile) else t.hosts()
    for i, c in enumerate(spec.cross):
        if c.src >= hosts or c.dst >= hosts:
            raise SimSpecError(f"cross[{i}]: src and dst must be host indices below {hosts}")
    s = spec.shuffle
    workload: dict[str, Any]
    if s is None:
        traffic = spec.traffic
        assert traffic is not None
        src, dst, size_b = traffic_matrix(spec, hosts, seed, base_dir)
        workload = {
            "matrix": {"src": src.tolist(), "dst": dst.tolist(), "bytes": size_b.tolist()},
            "max_reqs_in_flight": traffic.max_reqs_in_flight or 2**31 - 1,
            "max_bytes_in_flight": traffic.max_mib_in_flight * MIB,
        }
    else:
        sizes: dict[str, Any]
        if isinstance(s.size, Constant):
            sizes = {"kind": "constant", "bytes": s.size.mib * MIB}
        elif isinstance(s.size, Lognormal):
            sizes = {"kind": "lognormal", "mean_bytes": s.size.mean_mib * MIB, "sigma": s.size.sigma}
        else:
            sizes = {"kind": "empirical", "bytes": read_trace(base_dir / s.size.file)}
        workload = {
            "maps": s.maps,
            "reducers": s.reducers,
            "sizes": sizes,
            "max_reqs_in_flight": s.max_reqs_in_flight or 2**31 - 1,
            "max_bytes_in_flight": s.max_mib_in_flight * MIB,
        }
    config: dict[str, Any] = {
        "topology": topology,
        "cores_per_host": spec.hosts.cores,
        "seed": seed,
        "recompute": recompute or spec.experiment.recompute,
        "shuffle": workload,
        "cross": [
            {
                "src": c.src,
                "dst": c.dst,
                "kind": c.kind,
                "rate_bytes_per_s": (c.gbps or 0.0) * bps,
                "udp_mode": c.udp_mode,
                "start_s": c.start_s,
                "stop_s": c.stop_s,
                "bytes": None if c.mib is None else c.mib * MIB,
            }
            for c in spec.cross
        ],
        "failures": [f.model_dump() for f in spec.failures],
        "fct_bucket_edges_bytes": [b * MIB for b in spec.output.fct_buckets_mib],
        "heatmap_bins": spec.output.heatmap_bins,
    }
    if spec.tcp is not None:
        config["tcp"] = spec.tcp.core()
    if spec.mode == "packet":
        config["mode"] = "packet"
        if spec.packet.cluster:
            config["packet"] = {"cluster_tolerance": spec.packet.cluster_tolerance}
    return config
