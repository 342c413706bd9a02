"""The user-application workload on Spark in local mode: a PySpark script and a jar's main class
run inside the session the lab created, their failures are named."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import sparklocal
from shufflelab.workloads import userapp

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK 17 (make setup installs it)"),
]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "user-app" / "skewed_join.py"

JAVA = """
package lab.example;
import org.apache.spark.sql.SparkSession;
public class CountMain {
  public static void main(String[] args) {
    SparkSession s = SparkSession.builder().appName("count").getOrCreate();
    long n = s.range(Long.parseLong(args[0])).repartition(3).count();
    if (n != Long.parseLong(args[0])) throw new IllegalStateException("count " + n);
    if (args.length > 1) throw new IllegalArgumentException("boom " + args[1]);
    System.setProperty("lab.example.count", Long.toString(n));
  }
}
"""


@dataclass
class App:
    script: str | None = None
    jar: str | None = None
    main_class: str | None = None
    args: list[str] = field(default_factory=list)
    py_files: list[str] = field(default_factory=list)


def _jar() -> Path:
    """The example application's jar, built against the installed Spark once per machine."""
    import pyspark

    cp = str(Path(pyspark.__file__).parent / "jars" / "*")

    def build(out: Path) -> None:
        src = out / "src" / "lab" / "example" / "CountMain.java"
        src.parent.mkdir(parents=True)
        src.write_text(JAVA)
        classes = out / "classes"
        subprocess.run(["javac", "-d", str(classes), "-cp", cp, str(src)], check=True, capture_output=True)
        subprocess.run(["jar", "cf", str(out / "count.jar"), "-C", str(classes), "."], check=True, capture_output=True)

    return sparklocal.built_once("userapp-jar", (JAVA + pyspark.__version__).encode(), build) / "count.jar"


@pytest.fixture(scope="module")
def session() -> Iterator[tuple[Any, Path]]:
    jar = _jar()
    s = sparklocal.builder("shufflelab-userapp-test", conf={"spark.jars": str(jar)}).getOrCreate()
    yield s, jar
    sparklocal.stop(s)


def test_example_script_runs_in_the_labs_session(session: tuple[Any, Path], capsys: Any) -> None:
    spark, _ = session
    out = userapp.run(spark, App(script=str(EXAMPLE), args=["--orders", "3000", "--customers", "50"]))
    assert out["kind"] == "pyspark" and out["app"] == "skewed_join.py"
    assert "3000 orders in 7 regions" in capsys.readouterr().out
    assert spark.sparkContext._jsc is not None  # the lab's session is still the active one


def test_script_failure_names_the_script(session: tuple[Any, Path], tmp_path: Path) -> None:
    spark, _ = session
    bad = tmp_path / "bad_job.py"
    bad.write_text("import sys\nsys.exit(3)\n")
    with pytest.raises(userapp.AppFailed, match="bad_job.py exited with status 3"):
        userapp.run(spark, App(script=str(bad)))
    ok = tmp_path / "ok_job.py"
    ok.write_text("import sys\nassert sys.argv[1:] == ['a', 'b']\nsys.exit(0)\n")
    userapp.run(spark, App(script=str(ok), args=["a", "b"]))


def test_py_files_are_importable(session: tuple[Any, Path], tmp_path: Path) -> None:
    spark, _ = session
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "helper_mod.py").write_text("def double(x):\n    return 2 * x\n")
    job = tmp_path / "uses_lib.py"
    job.write_text(
        "from pyspark.sql import SparkSession\nimport helper_mod\n"
        "s = SparkSession.builder.getOrCreate()\n"
        "assert s.sparkContext.parallelize(range(10), 2).map(helper_mod.double).sum() == 90\n"
    )
    userapp.run(spark, App(script=str(job), py_files=[str(lib / "helper_mod.py")]))


def test_jar_main_runs_and_its_exception_is_named(session: tuple[Any, Path]) -> None:
    spark, jar = session
    out = userapp.run(spark, App(jar=str(jar), main_class="lab.example.CountMain", args=["500"]))
    assert out["kind"] == "jar"
    assert spark.sparkContext._jvm.java.lang.System.getProperty("lab.example.count") == "500"
    with pytest.raises(userapp.AppFailed, match="lab.example.CountMain.main failed.*boom x"):
        userapp.run(spark, App(jar=str(jar), main_class="lab.example.CountMain", args=["5", "x"]))
