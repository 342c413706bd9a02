"""The JVM and the Spark that shufflelab runs: pyspark's home and version, the JDK's version."""

from __future__ import annotations

import subprocess
from pathlib import Path


def spark_home() -> Path:
    """The installed pyspark's directory (its ``jars/`` is the Spark every daemon runs)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def spark_jars() -> Path:
    return spark_home() / "jars"


def spark_version() -> str:
    import pyspark

    return str(pyspark.__version__)


def java_version() -> str:
    """``java -version``'s text (it goes to stderr)."""
    r = subprocess.run(["java", "-version"], capture_output=True, text=True)
    return (r.stderr or r.stdout).strip()
