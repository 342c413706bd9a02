"""The user-application workload in the spec: one entry point, files relative to the spec, the lab's
Spark settings refused, its fields only with name = 'app'."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from shufflelab import spec as S


def _app(spec_dict: dict[str, Any], **workload: Any) -> dict[str, Any]:
    d = copy.deepcopy(spec_dict)
    d["workload"] = {"name": "app", **workload}
    return d


def test_script_app_validates_and_gives_the_driver_its_fields(spec_dict: dict[str, Any]) -> None:
    s = S.parse(_app(spec_dict, script="/x/job.py", args=["--n", "5"], conf={"spark.sql.adaptive.enabled": "true"}))
    p = s.workload_params()
    assert isinstance(p, S.AppParams) and p.script == "/x/job.py" and p.args == ["--n", "5"]
    assert s.workload.param_data()["conf"] == {"spark.sql.adaptive.enabled": "true"}
    assert S.WORKLOAD_PARAMS["app"].model_validate(s.workload.param_data()) == p  # what the driver re-validates


@pytest.mark.parametrize(
    ("workload", "needle"),
    [
        ({}, "exactly one of script"),
        ({"script": "a.py", "jar": "b.jar", "main_class": "M"}, "exactly one of script"),
        ({"script": "job.sh"}, "ending in .py"),
        ({"jar": "a.jar"}, "jar needs main_class"),
        ({"script": "a.py", "main_class": "M"}, "main_class goes with jar"),
        ({"script": "a.py", "params": {"rows": 1}}, "not params"),
        (
            {"script": "a.py", "conf": {"spark.eventLog.dir": "/tmp"}},
            'workload.conf."spark.eventLog.dir": Value error, reserved',
        ),
        ({"script": "a.py", "conf": {"spark.extraListeners": "x"}}, "reserved"),
        ({"script": "a.py", "conf": {"spark.master": "local"}}, "reserved"),
        ({"script": "a.py", "conf": {"nospark": "1"}}, "must start with 'spark.'"),
    ],
)
def test_bad_app_names_the_field(spec_dict: dict[str, Any], workload: dict[str, Any], needle: str) -> None:
    with pytest.raises(S.SpecError, match="t.toml") as err:
        S.parse(_app(spec_dict, **workload), "t.toml")
    assert needle in str(err.value)


def test_app_fields_belong_to_app_only(spec_dict: dict[str, Any]) -> None:
    d = copy.deepcopy(spec_dict)
    d["workload"]["script"] = "job.py"
    with pytest.raises(S.SpecError, match="script: only for a user application"):
        S.parse(d)


SHIPPED = Path(__file__).resolve().parents[2] / "experiments" / "user-app.toml"


def test_files_resolve_relative_to_the_spec_and_must_exist(tmp_path: Path) -> None:
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "job.py").write_text("print('hi')\n")
    (tmp_path / "jobs" / "lib.py").write_text("X = 1\n")
    exp = tmp_path / "exp"
    exp.mkdir()
    base = SHIPPED.read_text().replace('script = "../examples/user-app/skewed_join.py"', 'script = "../jobs/job.py"')
    assert 'script = "../jobs/job.py"' in base
    path = exp / "e.toml"
    path.write_text(base.replace("[workload]\n", '[workload]\npy_files = ["../jobs/lib.py"]\n'))
    s = S.load(path)
    assert s.workload.script == str((tmp_path / "jobs" / "job.py").resolve())
    assert s.workload.py_files == [str((tmp_path / "jobs" / "lib.py").resolve())]
    path.write_text(base.replace("[workload]\n", '[workload]\npy_files = ["../jobs/missing.py"]\n'))
    with pytest.raises(S.SpecError, match=r"e.toml: workload.py_files\[0\]: no file .*missing.py"):
        S.load(path)
