"""What every part of an experiment spec shares: the names of choices and the model base."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from shufflelab.names import whole

CongestionControl = Literal["cubic", "reno", "bbr", "dctcp"]
Role = Literal["spark-master", "spark-worker", "traffic-source", "traffic-sink", "mapreduce", "storage"]
Datapath = Literal["auto", "kernel", "switch"]
SwitchMode = Literal["off", "dctcp", "vcc"]

DCTCP_BASE = "cubic"
"""What a ``dctcp`` host's kernel runs: this kernel has no dctcp module, so DCTCP is enforced by the
userspace switch (window rewriting) over the host's own cubic with ``tcp_ecn = 1``."""

NAME_PATTERN = whole(r"[a-z][a-z0-9]{0,7}")
MEMORY_PATTERN = whole(r"[0-9]+[kmgt]")


class SpecModel(BaseModel):
    # nan/inf are valid TOML floats but no value any field can take (no command, no model applies them)
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
