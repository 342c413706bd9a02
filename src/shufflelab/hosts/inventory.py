"""The inventory: the real hosts an experiment runs on, how to reach them, and which spec host
runs where. A TOML file validated with pydantic; every error names the file and the field. Pure
(no network): :func:`load` only reads the file and checks that key files exist.

```toml
[ssh]                      # optional
known_hosts = "~/.ssh/known_hosts"
connect_timeout_s = 10

[hosts.node1]
address = "192.0.2.10"     # an IP address: a name could resolve to a machine not listed here
user = "root"              # or a user with passwordless sudo
port = 22
key_file = "~/.ssh/id_ed25519"   # or agent = true
data_interface = "eth1"
# control_interface_shaping_allowed = true   # only if data and SSH share the interface

[map]                      # spec host -> inventory host
master = "node1"
```

A Spark master may share its machine with one Spark worker; every other spec host needs a machine
of its own (:func:`check_mapping` says why, per role).

A top-level ``router = "node9"`` names the host that holds a shared bottleneck (``topology.kind =
"shared"``): the mapped hosts route to each other through it (IP forwarding), and its data
interface's egress is the one shaped queue.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from shufflelab.names import INTERFACE, whole
from shufflelab.spec import ExperimentSpec, SpecError, field_path, read_toml

DEFAULT_LEASE_DIR = "/var/lib/shufflelab/leases"
HOST_NAME = whole(r"[A-Za-z][A-Za-z0-9_-]{0,62}")
USER_NAME = whole(r"[a-z_][a-z0-9_.-]{0,31}")


class InventoryError(SpecError):
    """An inventory that cannot be used; the message names the file, the field and why."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def _absolute_path(v: str) -> str:
    if not v.startswith("/") or any(c in v for c in "'\"\\$`\n\t ") or ".." in v.split("/"):
        raise ValueError("an absolute path without quotes, spaces, '$', '`' or '..'")
    return v.rstrip("/") or "/"


def _deploy_path(v: str) -> str:
    v = _absolute_path(v)
    if v == "/" or v.count("/") < 2:
        raise ValueError(f"{v!r}: give a folder of its own for the deployed software (at least two levels deep)")
    return v


class SshSettings(_Model):
    known_hosts: str = Field(
        default="~/.ssh/known_hosts", description="OpenSSH known_hosts file every host key is verified against."
    )
    connect_timeout_s: float = Field(
        default=10.0,
        gt=0,
        le=600,
        description="Connecting and logging in; also the keepalive interval (a host silent 4 x this long is lost).",
    )
    command_timeout_s: float = Field(default=120.0, gt=0, le=86_400)
    lease_dir: str = Field(default=DEFAULT_LEASE_DIR, description="Where each host keeps its lease files.")
    deploy_dir: str | None = Field(
        default=None,
        description="Where `shufflelab deploy` puts the software on every host (hosts.NAME.deploy_dir overrides); "
        "unset: the same paths as on the controller.",
    )

    @field_validator("lease_dir")
    @classmethod
    def _absolute(cls, v: str) -> str:
        return _absolute_path(v)

    @field_validator("deploy_dir")
    @classmethod
    def _deploy_dir(cls, v: str | None) -> str | None:
        return None if v is None else _deploy_path(v)


class InventoryHost(_Model):
    address: str = Field(description="IPv4 or IPv6 address of the host's SSH server.")
    user: str = "root"
    port: int = Field(default=22, ge=1, le=65535)
    key_file: str | None = Field(default=None, description="Private key file (relative to the inventory file).")
    agent: bool = Field(default=False, description="Use the SSH agent (SSH_AUTH_SOCK) instead of a key file.")
    data_interface: str = Field(description="The interface that carries the experiment's traffic.")
    control_interface_shaping_allowed: bool = Field(
        default=False,
        description="Allow shaping the interface that carries the SSH control connection (off: refused).",
    )
    deploy_dir: str | None = Field(
        default=None,
        description="Where `shufflelab deploy` puts the software on this host (default: ssh.deploy_dir).",
    )

    @field_validator("deploy_dir")
    @classmethod
    def _deploy_dir(cls, v: str | None) -> str | None:
        return None if v is None else _deploy_path(v)

    @field_validator("address")
    @classmethod
    def _ip(cls, v: str) -> str:
        try:
            return str(ipaddress.ip_address(v))
        except ValueError:
            raise ValueError(
                f"{v!r} is not an IP address (give the address itself: a name could resolve to a machine not listed)"
            ) from None

    @field_validator("user")
    @classmethod
    def _user(cls, v: str) -> str:
        if not USER_NAME.match(v):
            raise ValueError(f"{v!r} is not a user name")
        return v

    @field_validator("data_interface")
    @classmethod
    def _iface(cls, v: str) -> str:
        if not INTERFACE.match(v):
            raise ValueError(f"{v!r} is not an interface name (1-15 characters, no spaces or slashes)")
        return v

    @model_validator(mode="after")
    def _auth(self) -> InventoryHost:
        if (self.key_file is None) == (not self.agent):
            raise ValueError("give exactly one of key_file = '...' or agent = true")
        return self

    @property
    def needs_sudo(self) -> bool:
        return self.user != "root"


class Inventory(_Model):
    ssh: SshSettings = SshSettings()
    hosts: dict[str, InventoryHost]
    map: dict[str, str] = Field(default_factory=dict, description="Spec host name -> inventory host name.")
    router: str | None = Field(
        default=None,
        description="Inventory host that holds a shared bottleneck: the others route to each other through it.",
    )

    @field_validator("hosts")
    @classmethod
    def _names(cls, v: dict[str, InventoryHost]) -> dict[str, InventoryHost]:
        if not v:
            raise ValueError("list at least one host ([hosts.NAME] with address, key_file or agent, data_interface)")
        for name in v:
            if not HOST_NAME.match(name):
                raise ValueError(f"host name {name!r}: letters, digits, '_' or '-', starting with a letter")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Inventory:
        seen: dict[tuple[str, int], str] = {}
        for name, h in self.hosts.items():
            other = seen.get((h.address, h.port))
            if other is not None:
                raise ValueError(f"hosts.{name}.address: {h.address} port {h.port} is also hosts.{other}'s")
            seen[(h.address, h.port)] = name
        for spec_host, inv_host in self.map.items():
            if inv_host not in self.hosts:
                have = ", ".join(self.hosts)
                raise ValueError(f"map.{spec_host}: no inventory host named {inv_host!r} (have {have})")
        by_target = {inv_host: spec_host for spec_host, inv_host in self.map.items()}
        if self.router is not None:
            if self.router not in self.hosts:
                raise ValueError(f"router: no inventory host named {self.router!r} (have {', '.join(self.hosts)})")
            if self.router in by_target:
                raise ValueError(
                    f"router: {self.router!r} runs spec host {by_target[self.router]!r}; the router host forwards "
                    "and shapes only (give it a machine of its own)"
                )
        return self

    def addresses(self) -> frozenset[str]:
        """The only addresses the backend may contact or send traffic to."""
        return frozenset(h.address for h in self.hosts.values())


def _describe(err: Any) -> str:
    loc = field_path(tuple(err["loc"]))
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = "unknown field"
    elif err["type"] == "missing":
        msg = "missing (required)"
    return f"{loc}: {msg}" if loc else msg


def parse(data: dict[str, Any], where: str = "<inventory>", base: Path | None = None) -> Inventory:
    """Validate an inventory dictionary; key files are resolved against ``base`` and must exist."""
    try:
        inv = Inventory.model_validate(data)
    except ValidationError as exc:
        raise InventoryError(f"{where}: " + "; ".join(_describe(e) for e in exc.errors())) from None
    hosts = {}
    for name, h in inv.hosts.items():
        if h.key_file is not None:
            key = Path(h.key_file).expanduser()
            if not key.is_absolute() and base is not None:
                key = base / key
            if not key.is_file():
                raise InventoryError(f"{where}: hosts.{name}.key_file: {key}: no such file")
            h = h.model_copy(update={"key_file": str(key)})
        if h.deploy_dir is None and inv.ssh.deploy_dir is not None:
            h = h.model_copy(update={"deploy_dir": inv.ssh.deploy_dir})
        hosts[name] = h
    known = Path(inv.ssh.known_hosts).expanduser()
    if not known.is_absolute() and base is not None:
        known = base / known
    ssh = inv.ssh.model_copy(update={"known_hosts": str(known)})
    return inv.model_copy(update={"hosts": hosts, "ssh": ssh})


def load(path: str | Path) -> Inventory:
    """Read and validate an inventory TOML file (errors name the file and the field)."""
    p = Path(path)
    return parse(read_toml(p, InventoryError), str(p), p.resolve().parent)


# why a spec host with this role needs a machine of its own (the roles that may share one: a Spark
# master with one worker, whose daemons' ports differ and whose traffic with each other is small)
ALONE = {
    "traffic-source": "its cross traffic must cross the network to its sink and take no CPU from the job",
    "traffic-sink": "its cross traffic must cross the network from its source and take no CPU from the job",
    "storage": "what Spark reads from it must cross the network",
    "mapreduce": "the replay's fetches must cross the network, and its agents share one port",
}
TRAFFIC_ROLES = frozenset({"traffic-source", "traffic-sink"})


def idle_traffic_hosts(spec: ExperimentSpec) -> bool:
    """Whether the traffic source and sink run nothing: the userspace switch makes the UDP itself
    (``cross_traffic.generator = "switch"``), in the queue the sink's traffic would cross."""
    return spec.cross_traffic.generator == "switch"


def sharing_problem(spec: ExperimentSpec, machine: str, spec_hosts: list[str]) -> str | None:
    """Why ``spec_hosts`` may not run on one ``machine`` (None: they may). Only a Spark master may
    share a machine, with one worker: two workers' shuffle would not cross the network (and their
    daemons' ports collide), and the other roles' traffic is the experiment's -- but a traffic source
    and sink that run nothing (the switch makes the UDP) may share any machine. Pure."""
    if len(spec_hosts) < 2:
        return None
    names = " and ".join(", ".join(spec_hosts).rsplit(", ", 1))
    idle = idle_traffic_hosts(spec)
    for h in spec_hosts:
        for role in spec.hosts[h].roles:
            if role in ALONE and not (idle and role in TRAFFIC_ROLES):
                return f"map: {names} share machine {machine!r}, but {h} ({role}) needs one of its own: {ALONE[role]}"
    busy = [h for h in spec_hosts if not (idle and set(spec.hosts[h].roles) <= TRAFFIC_ROLES)]
    workers = [h for h in busy if "spark-worker" in spec.hosts[h].roles]
    masters = [h for h in busy if "spark-master" in spec.hosts[h].roles]
    if len(workers) > 1:
        return (
            f"map: {names} share machine {machine!r}, but {', '.join(workers)} are Spark workers: a shuffle between "
            "them would not cross the network, and their daemons' ports collide (one worker per machine)"
        )
    if len(busy) > 2 or (len(busy) == 2 and (len(masters) != 1 or not workers)):
        return f"map: {names} share machine {machine!r}: only a Spark master may share a machine, with one worker"
    return None


def machine_groups(mapping: dict[str, str]) -> list[list[str]]:
    """The spec hosts that share a machine under ``mapping`` (spec host -> inventory host), in groups
    of two or more. Pure."""
    by_machine: dict[str, list[str]] = {}
    for spec_host, machine in mapping.items():
        by_machine.setdefault(machine, []).append(spec_host)
    return [hosts for hosts in by_machine.values() if len(hosts) > 1]


def check_mapping(inv: Inventory, spec: ExperimentSpec, where: str = "<inventory>") -> dict[str, str]:
    """Spec host -> inventory host for ``spec``; raise :class:`InventoryError` if a spec host is not
    mapped, the map names hosts the spec does not have, or spec hosts share a machine their roles
    may not share (:func:`sharing_problem`)."""
    problems = []
    unmapped = [h for h in spec.hosts if h not in inv.map]
    if unmapped:
        problems.append(f"map: spec hosts {', '.join(unmapped)} are not mapped to inventory hosts")
    extra = [h for h in inv.map if h not in spec.hosts]
    if extra:
        problems.append(f"map: {', '.join(extra)} are not hosts of experiment {spec.experiment.name!r}")
    if problems:
        raise InventoryError(f"{where}: " + "; ".join(problems))
    mapping = {h: inv.map[h] for h in spec.hosts}
    for group in machine_groups(mapping):
        why = sharing_problem(spec, mapping[group[0]], group)
        if why is not None:
            problems.append(why)
    if problems:
        raise InventoryError(f"{where}: " + "; ".join(problems))
    return mapping
