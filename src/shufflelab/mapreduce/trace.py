"""MapReduce job traces: what each map produces for each reducer, and how long tasks take.

A trace is JSON (``Trace.model_dump_json``): ``maps`` with a start offset, a duration and the
bytes of output destined to each reducer; ``reduces`` with the compute time after their shuffle;
``parallel_copies`` (Hadoop's ``mapreduce.reduce.shuffle.parallelcopies``, default 5) and
``slowstart`` (``mapreduce.job.reduce.slowstart.completedmaps``: reducers start fetching once this
fraction of maps is done). Two generators: :func:`synthetic` (sizes from a named distribution)
and :func:`hadoop_sort` (the shape of a TeraSort-like job: equal-size map inputs, output equal to
input, uniformly partitioned, map durations proportional to input).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MapTask(_Model):
    start_s: float = Field(default=0.0, ge=0, description="When the map starts, from job start.")
    duration_s: float = Field(ge=0, description="Map run time (replayed as a sleep).")
    output_bytes: list[int] = Field(description="Bytes of this map's output for each reducer, in reducer order.")


class ReduceTask(_Model):
    duration_s: float = Field(default=0.0, ge=0, description="Reduce compute after the shuffle (a sleep).")


class Trace(_Model):
    name: str = "trace"
    maps: list[MapTask] = Field(min_length=1)
    reduces: list[ReduceTask] = Field(min_length=1)
    parallel_copies: int = Field(default=5, ge=1, le=1000)
    slowstart: float = Field(default=0.05, ge=0, le=1)

    @model_validator(mode="after")
    def _sizes(self) -> Trace:
        n = len(self.reduces)
        for i, m in enumerate(self.maps):
            if len(m.output_bytes) != n:
                raise ValueError(
                    f"maps[{i}].output_bytes has {len(m.output_bytes)} entries, expected {n} (one per reducer)"
                )
            if any(b < 0 for b in m.output_bytes):
                raise ValueError(f"maps[{i}].output_bytes: sizes must be >= 0")
        return self

    @property
    def shuffle_bytes(self) -> int:
        return sum(sum(m.output_bytes) for m in self.maps)

    def map_end_s(self, i: int) -> float:
        m = self.maps[i]
        return m.start_s + m.duration_s

    def slowstart_s(self) -> float:
        """When reducers start: the instant the ``slowstart`` fraction of maps has finished."""
        ends = sorted(self.map_end_s(i) for i in range(len(self.maps)))
        k = max(1, int(-(-self.slowstart * len(ends) // 1))) if self.slowstart > 0 else 0
        return ends[k - 1] if k > 0 else 0.0


Dist = Literal["constant", "uniform", "lognormal"]


def _draw(rng: random.Random, dist: Dist, mean: float, spread: float) -> float:
    if dist == "constant" or mean == 0:
        return mean
    if dist == "uniform":
        return rng.uniform(mean * (1 - spread), mean * (1 + spread))
    # lognormal with the given mean and sigma = spread
    import math

    mu = math.log(mean) - spread**2 / 2
    return rng.lognormvariate(mu, spread)


def synthetic(
    mappers: int,
    reducers: int,
    partition_mb: float,
    *,
    dist: Dist = "lognormal",
    spread: float = 0.5,
    map_s: float = 1.0,
    map_spread: float = 0.2,
    reduce_s: float = 0.0,
    waves: int = 1,
    parallel_copies: int = 5,
    slowstart: float = 0.05,
    seed: int = 1,
    name: str | None = None,
) -> Trace:
    """``mappers`` x ``reducers`` partitions of mean ``partition_mb`` MB drawn from ``dist``;
    maps in ``waves`` equal waves (a wave starts when the previous one's longest map ends)."""
    if mappers < 1 or reducers < 1 or waves < 1:
        raise ValueError("mappers, reducers and waves must be >= 1")
    rng = random.Random(seed)
    per_wave = -(-mappers // waves)
    maps: list[MapTask] = []
    wave_start = 0.0
    for w in range(waves):
        n = min(per_wave, mappers - w * per_wave)
        durations = [max(0.0, _draw(rng, "uniform", map_s, map_spread)) for _ in range(n)]
        for d in durations:
            sizes = [max(0, int(_draw(rng, dist, partition_mb * 1e6, spread))) for _ in range(reducers)]
            maps.append(MapTask(start_s=wave_start, duration_s=d, output_bytes=sizes))
        wave_start += max(durations, default=0.0)
    return Trace(
        name=name or f"synthetic-{mappers}x{reducers}-{partition_mb:g}MB-{dist}",
        maps=maps,
        reduces=[ReduceTask(duration_s=reduce_s) for _ in range(reducers)],
        parallel_copies=parallel_copies,
        slowstart=slowstart,
    )


def hadoop_sort(
    mappers: int = 16,
    reducers: int = 8,
    input_mb_per_map: float = 16.0,
    *,
    map_mb_per_s: float = 32.0,
    reduce_mb_per_s: float = 64.0,
    seed: int = 1,
) -> Trace:
    """A sort-shaped job: each map reads ``input_mb_per_map`` and emits the same bytes, split
    almost evenly over the reducers (±5 %: key ranges from sampling are not exact); map time is
    input / ``map_mb_per_s``; reduce compute is its input / ``reduce_mb_per_s``."""
    rng = random.Random(seed)
    total = input_mb_per_map * 1e6
    maps = []
    for _ in range(mappers):
        weights = [rng.uniform(0.95, 1.05) for _ in range(reducers)]
        s = sum(weights)
        sizes = [int(total * w / s) for w in weights]
        maps.append(MapTask(duration_s=input_mb_per_map / map_mb_per_s * rng.uniform(0.9, 1.1), output_bytes=sizes))
    per_reduce_mb = mappers * input_mb_per_map / reducers
    return Trace(
        name=f"hadoop-sort-{mappers}x{reducers}-{input_mb_per_map:g}MB",
        maps=maps,
        reduces=[ReduceTask(duration_s=per_reduce_mb / reduce_mb_per_s) for _ in range(reducers)],
    )


def load(path: str | Path) -> Trace:
    p = Path(path)
    try:
        return Trace.model_validate(json.loads(p.read_text()))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{p}: cannot read trace: {exc}") from None


def save(trace: Trace, path: str | Path) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(p.suffix + ".tmp")
    tmp.write_text(trace.model_dump_json(indent=1))
    tmp.replace(p)
    return p
