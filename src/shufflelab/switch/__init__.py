"""Control of shufflelab's userspace switch (``crates/switch``): configuration, start, stop,
telemetry. The switch replaces the kernel's forwarding and shaping in a router namespace for
what this kernel lacks: delay, RED/ECN, DCTCP in the switch and congestion-control
virtualization (VCC)."""

from shufflelab.switch.config import CrossSource, Red, SwitchConfig, SwitchHost, SwitchPort
from shufflelab.switch.controller import (
    STATUS_HEADER,
    TELEMETRY_HEADER,
    Switch,
    SwitchError,
    binary_path,
    last_rows,
    read_telemetry,
)

__all__ = [
    "STATUS_HEADER",
    "TELEMETRY_HEADER",
    "CrossSource",
    "Red",
    "Switch",
    "SwitchConfig",
    "SwitchError",
    "SwitchHost",
    "SwitchPort",
    "binary_path",
    "last_rows",
    "read_telemetry",
]
