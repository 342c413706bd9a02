"""The error a workload raises when it failed after measuring something."""

from __future__ import annotations

from typing import Any


class WorkloadFailed(RuntimeError):
    """A workload that failed after measuring something: ``output`` is kept with the error."""

    def __init__(self, message: str, output: dict[str, Any]) -> None:
        super().__init__(message)
        self.output = output
