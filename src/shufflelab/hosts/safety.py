"""Safety rules of the SSH backend: only inventory addresses are contacted or targeted, and the
interface carrying the SSH control connection is never shaped unless the inventory allows it."""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from shufflelab.hosts.inventory import Inventory

if TYPE_CHECKING:
    from shufflelab.hosts.control import Session


class SafetyError(RuntimeError):
    """A change that would break a safety rule; the message names the host and the rule."""


def check_target(inv: Inventory, address: str) -> None:
    """Refuse any address that is not an inventory host's (connections and traffic alike)."""
    try:
        canonical = str(ipaddress.ip_address(address))
    except ValueError:
        raise SafetyError(f"{address!r} is not an IP address; only inventory addresses may be targeted") from None
    if canonical not in inv.addresses():
        raise SafetyError(
            f"{canonical} is not an inventory host's address; shufflelab contacts and sends traffic only to "
            f"{', '.join(sorted(inv.addresses()))}"
        )


def controller_address(ssh_connection: str) -> str:
    """The controller's address as the host sees it, from the host's ``SSH_CONNECTION``
    (``client_ip client_port server_ip server_port``)."""
    parts = ssh_connection.split()
    if len(parts) != 4:
        raise ValueError(f"SSH_CONNECTION {ssh_connection!r} is not 'client port server port'")
    return str(ipaddress.ip_address(parts[0]))


def route_device(route_get_json: str) -> str:
    """The output device of ``ip -j route get ADDR``."""
    routes = json.loads(route_get_json)
    if not routes or "dev" not in routes[0]:
        raise ValueError(f"no device in `ip -j route get`: {route_get_json.strip()!r}")
    return str(routes[0]["dev"])


async def control_interface(session: Session) -> str:
    """The host's interface that carries this SSH connection: the route back to the controller's
    address as the host sees it (SSH_CONNECTION, so NAT in between does not fool it)."""
    env = await session.run("find the control interface", ["sh", "-c", 'printf %s "$SSH_CONNECTION"'])
    peer = controller_address(env.stdout)
    r = await session.run("find the control interface", ["ip", "-j", "route", "get", peer])
    return route_device(r.stdout)


async def check_shaping(session: Session, interface: str) -> None:
    """Refuse to change ``interface``'s qdisc if it carries the control connection, unless the
    inventory sets ``control_interface_shaping_allowed`` for the host."""
    control = await control_interface(session)
    if control == interface and not session.host.control_interface_shaping_allowed:
        raise SafetyError(
            f"host {session.name} ({session.host.address}): {interface} carries the SSH control connection; "
            "shaping it could cut the controller off. Use a separate data interface, or set "
            f"hosts.{session.name}.control_interface_shaping_allowed = true in the inventory"
        )


def check_traffic(argv: Sequence[str], data_addresses: Collection[str]) -> None:
    """Refuse an iperf3 client (cross traffic) aimed at anything but an inventory host's data address."""
    if not argv or Path(argv[0]).name != "iperf3" or "-c" not in argv:
        return
    at = list(argv).index("-c") + 1
    target = argv[at] if at < len(argv) else ""
    if target not in data_addresses:
        raise SafetyError(
            f"iperf3 cross traffic to {target!r}: only the inventory hosts' data addresses may be targeted "
            f"({', '.join(sorted(data_addresses))})"
        )
