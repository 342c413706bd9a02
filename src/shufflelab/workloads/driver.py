"""Spark driver entry point: ``python -m shufflelab.workloads.driver REQUEST.json``.

Runs inside the master's namespace. The request names the workload, its parameters and the
Spark conf; the result (application id, phase timings, counts or the error) is written as JSON
to the request's ``result`` path, so the runner never parses the driver's log.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    req: dict[str, Any] = json.loads(Path(args[0]).read_text())
    out = Path(req["result"])
    result: dict[str, Any] = {"ok": False, "started_at": time.time()}
    spark = None
    try:
        from pyspark.sql import SparkSession

        from shufflelab.sparkconf import DIST_CLASS_PATH, dist_class_path

        if req.get("class_path_after"):  # Spark's launcher puts them after its own jars in this JVM
            os.environ[DIST_CLASS_PATH] = dist_class_path(os.environ.get(DIST_CLASS_PATH), req["class_path_after"])

        builder = SparkSession.builder.appName(req["app_name"]).master(req["master"])
        for k, v in req["conf"].items():
            builder = builder.config(k, v)
        spark = builder.getOrCreate()
        result["app_id"] = spark.sparkContext.applicationId
        result["session_ready_at"] = time.time()
        # the runner times injected faults from here (the workload submits its first job next)
        with contextlib.suppress(OSError):
            out.with_suffix(".ready").write_text(str(result["session_ready_at"]))
        from shufflelab.spec import WORKLOAD_PARAMS
        from shufflelab.workloads import REGISTRY

        params = WORKLOAD_PARAMS[req["workload"]].model_validate(req["params"])
        result["output"] = REGISTRY[req["workload"]](spark, params, **req.get("context", {}))
        result["ok"] = True
    except BaseException as exc:  # noqa: BLE001 - everything is reported to the runner
        result["error"] = f"{type(exc).__name__}: {exc}"
        if getattr(exc, "output", None) is not None:  # what the workload measured before it failed
            result["output"] = getattr(exc, "output")  # noqa: B009
        result["traceback"] = traceback.format_exc()
    finally:
        if spark is not None:
            with contextlib.suppress(Exception):
                spark.stop()
        result["finished_at"] = time.time()
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(result, indent=1))
        tmp.replace(out)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
