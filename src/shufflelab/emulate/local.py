"""The local backend: the fabric as network namespaces on this machine, Spark's daemons in them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

from shufflelab.emulate import netns
from shufflelab.emulate.fabric import NamespaceFabric
from shufflelab.emulate.protocols import Backend, Fabric, Switches
from shufflelab.emulate.spark import ClusterSpec, SparkCluster
from shufflelab.topology import Network

run_command = netns.run_at
launch = netns.launch_at


@contextlib.contextmanager
def open_fabric(network: Network, offloads: bool, switches: Switches | None = None) -> Iterator[NamespaceFabric]:
    """A fabric under a fresh lease: namespaces, links and shaping up; everything removed on exit
    (``switches``: see :class:`NamespaceFabric`)."""
    with netns.lease() as lease, NamespaceFabric(lease, network, offloads=offloads, switches=switches) as fabric:
        yield fabric


def new_cluster(spec: ClusterSpec, fabric: Fabric, scratch: Path, log_dir: Path) -> SparkCluster:
    return SparkCluster(spec, dict(fabric.places), fabric.network.host_addresses, scratch, log_dir)


def _clean() -> None:
    netns.clean()  # leftovers of crashed earlier runs (live runs are left alone)


def backend(switches: Switches | None = None) -> Backend:
    """The local backend; its fabrics run the userspace switch ``switches`` makes
    (:class:`shufflelab.switch.Switch`, handed by the CLI; None: the kernel datapath only)."""

    def fabric(network: Network, offloads: bool) -> AbstractContextManager[NamespaceFabric]:
        return open_fabric(network, offloads, switches)

    return Backend(open_fabric=fabric, new_cluster=new_cluster, run=run_command, launch=launch, clean=_clean)
