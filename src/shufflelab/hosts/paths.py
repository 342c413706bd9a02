"""Where a run finds its software on one host (:class:`HostPaths`): the interpreter, the
``shufflelab`` source, the Python environment, the cache (listener jar, class-data archive) and
the userspace switch. On a host with a ``deploy_dir`` (inventory ``hosts.NAME.deploy_dir`` or
``ssh.deploy_dir``) they are below it, where ``shufflelab deploy --hosts`` puts them; without one,
they are the controller's own paths (the checkout, its venv, ``~/.cache/shufflelab``), which these
functions read from the running interpreter.
"""

from __future__ import annotations

import functools
import os
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from shufflelab.artifacts import SWITCH_BINARY_NAME
from shufflelab.hosts.inventory import InventoryHost


def switch_binary() -> str:
    """Where the switch binary is on the controller, so on every host without a ``deploy_dir``
    (the same checkout): the built one, else where ``make setup`` builds it."""
    from shufflelab import artifacts

    found = artifacts.switch_binary()
    return str(found if found is not None else artifacts.switch_release_build())


@functools.cache
def source_root() -> str:
    """``src/`` of the running checkout (the folder that holds the ``shufflelab`` package)."""
    import shufflelab

    return str(Path(shufflelab.__file__).resolve().parent.parent)


def executable_rel() -> str:
    """This interpreter's path below its environment (``bin/python`` when it lies outside it)."""
    rel = os.path.relpath(sys.executable, sys.prefix)
    return rel if not rel.startswith("..") else "bin/python"


def _site_rel() -> str:
    """An environment's site-packages for this interpreter's minor version."""
    return f"lib/python{sys.version_info[0]}.{sys.version_info[1]}/site-packages"


@dataclass(frozen=True)
class HostPaths:
    """Where a run finds its software on one host."""

    python: str  # the interpreter of the driver, the sampler and pyspark's workers
    pythonpath: str | None  # None: the controller's sys.path (same paths as the controller)
    src: str  # the folder holding the shufflelab package
    venv: str  # the interpreter's environment
    site_packages: str
    cache: str  # the listener jar and the class-data archive
    switch: str  # the userspace switch (router host)
    deployed: bool  # a deploy_dir of its own (not the controller's paths)

    @property
    def spark_home(self) -> str:
        return f"{self.site_packages}/pyspark"

    @staticmethod
    def of(host: InventoryHost) -> HostPaths:
        return HostPaths.for_dir(host.deploy_dir)

    @staticmethod
    @functools.cache
    def for_dir(deploy_dir: str | None) -> HostPaths:
        from shufflelab import artifacts

        if deploy_dir is None:
            return HostPaths(
                python=sys.executable,
                pythonpath=None,
                src=source_root(),
                venv=sys.prefix,
                site_packages=sysconfig.get_paths()["purelib"],
                cache=str(artifacts.cache_root()),
                switch=switch_binary(),
                deployed=False,
            )
        venv = f"{deploy_dir}/venv"
        return HostPaths(
            python=f"{venv}/{executable_rel()}",
            pythonpath=f"{deploy_dir}/src",
            src=f"{deploy_dir}/src",
            venv=venv,
            site_packages=f"{venv}/{_site_rel()}",
            cache=f"{deploy_dir}/cache",
            switch=f"{deploy_dir}/bin/{SWITCH_BINARY_NAME}",
            deployed=True,
        )


def pythonpath(paths: HostPaths) -> str:
    return paths.pythonpath if paths.pythonpath is not None else os.pathsep.join(p for p in sys.path if p)


def artifacts_root() -> Path:
    from shufflelab import artifacts

    return artifacts.cache_root()
