"""``shufflelab deploy --hosts``, the plan (pure): what a host needs of what the controller has.

From the controller's items (:class:`Controller`: its Python, CPU, C library, Java and the files
of each item) and what a host has (:class:`Remote`, parsed from the probe's output by
:func:`parse_probe`), :func:`plan_host` gives per item what to copy, link and write, what is
already there, and the refusals naming the item: no Java or another Java feature version, no
Python of the controller's minor version, another CPU architecture or C library, files that differ
and that deploy did not create (never overwritten). A file is there when the host has it at its
place with the controller's size and modification time (SFTP copies keep both), or -- for a file
deploy did not put there -- the same SHA-256 (:func:`resolve_unsure`, given the hashes). The
:class:`Manifest` records exactly what deploy created on a host (:func:`manifest_path`).

No I/O here: :mod:`shufflelab.hosts.deploy` scans the controller and talks to the hosts.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from shufflelab.hosts.inventory import Inventory
from shufflelab.hosts.paths import HostPaths

MANIFEST_NAME = "deploy.json"
MANIFEST_FORMAT = 1


NO_VENV = "the controller runs no virtual environment: the host's interpreter at the same path"


class DeployError(RuntimeError):
    """Deploy refused or failed; the message names the host and the item."""


@dataclass(frozen=True)
class LocalFile:
    path: str  # on the controller
    rel: str  # below the item's root
    size: int
    mtime: int
    mode: int = 0o644


@dataclass(frozen=True)
class Item:
    """One thing deploy brings: files below a root (the controller's and the host's root differ
    with a deploy_dir), ``links`` (rel -> target; the target may be ``{python}``: the host's
    interpreter) and small generated ``texts`` (rel -> content; ``{home}`` the interpreter's folder)."""

    name: str
    root: str  # the controller's root (the host's when there is no deploy_dir)
    files: tuple[LocalFile, ...] = ()
    links: tuple[tuple[str, str], ...] = ()
    texts: tuple[tuple[str, str], ...] = ()
    skip: str | None = None  # why it is not brought (said, not refused)


@dataclass(frozen=True)
class Controller:
    python: tuple[int, int, int]
    machine: str
    libc: tuple[str, str]
    java: str | None  # "17.0.15"
    items: tuple[Item, ...]
    base_python: str  # the interpreter behind the venv (a candidate at the same path on a host)

    @property
    def java_feature(self) -> int | None:
        return java_feature(self.java)

    @property
    def minor(self) -> str:
        return f"{self.python[0]}.{self.python[1]}"


def java_feature(version: str | None) -> int | None:
    if not version:
        return None
    parts = version.split(".")
    try:
        return int(parts[1]) if parts[0] == "1" and len(parts) > 1 else int(parts[0].split("-")[0].split("+")[0])
    except ValueError:
        return None


def parse_java_version(text: str) -> str | None:
    m = re.search(r'version "([^"]+)"', text)
    return m.group(1) if m else None


@dataclass(frozen=True)
class Entry:
    kind: str  # f (file), d (folder), l (link), or other find %y letters
    size: int = 0
    mtime: int = 0
    target: str = ""


@dataclass
class Remote:
    """What a host has: its Java, the Python candidates (path -> (version, machine, libc name,
    libc version)), the entries below the roots deploy would write to, the existing folders above
    them, and the manifest of an earlier deploy."""

    java: str | None
    pythons: dict[str, tuple[tuple[int, int, int], str, str, str]]
    entries: dict[str, Entry]
    manifest: Manifest
    texts: dict[str, str] = field(default_factory=dict)  # contents of generated files that exist


@dataclass
class Manifest:
    files: dict[str, list[int]] = field(default_factory=dict)  # path -> [size, mtime]
    links: dict[str, str] = field(default_factory=dict)
    texts: dict[str, int] = field(default_factory=dict)  # path -> size
    dirs: list[str] = field(default_factory=list)  # created, parents first

    def to_json(self) -> str:
        doc = {"format": MANIFEST_FORMAT, "files": self.files, "links": self.links, "texts": self.texts}
        doc["dirs"] = self.dirs
        return json.dumps(doc, indent=1, sort_keys=True) + "\n"

    @staticmethod
    def parse(text: str) -> Manifest:
        if not text.strip():
            return Manifest()
        try:
            doc = json.loads(text)
            return Manifest(dict(doc["files"]), dict(doc["links"]), dict(doc.get("texts", {})), list(doc["dirs"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise DeployError(f"its deploy manifest cannot be read ({exc}): remove it by hand") from None

    @property
    def empty(self) -> bool:
        return not (self.files or self.links or self.texts or self.dirs)

    def owns(self, path: str) -> bool:
        return path in self.files or path in self.links or path in self.texts


def manifest_path(inv: Inventory) -> str:
    """Next to the lease folder: ``/var/lib/shufflelab/deploy.json`` for the default leases."""
    return f"{posixpath.dirname(inv.ssh.lease_dir) or '/'}/{MANIFEST_NAME}"


@dataclass(frozen=True)
class Copy:
    local: str
    remote: str
    size: int
    mtime: int


@dataclass
class ItemPlan:
    name: str
    copies: list[Copy] = field(default_factory=list)
    links: list[tuple[str, str]] = field(default_factory=list)  # remote path, target
    texts: list[tuple[str, str]] = field(default_factory=list)  # remote path, content
    present: int = 0  # already there
    skip: str | None = None

    @property
    def bytes(self) -> int:
        return sum(c.size for c in self.copies)

    @property
    def empty(self) -> bool:
        return not (self.copies or self.links or self.texts)

    def summary(self) -> str:
        if self.skip:
            return f"skipped: {self.skip}"
        if self.empty:
            return f"there ({self.present} files)"
        parts = []
        if self.copies:
            parts.append(f"{len(self.copies)} files, {self.bytes / 1e6:.1f} MB")
        if self.links or self.texts:
            parts.append(f"{len(self.links) + len(self.texts)} links/settings")
        return f"to bring: {', '.join(parts)} ({self.present} already there)"


@dataclass
class HostPlan:
    host: str
    paths: HostPaths
    python: str | None = None  # the host's interpreter behind the venv
    refusals: list[str] = field(default_factory=list)
    items: list[ItemPlan] = field(default_factory=list)
    unsure: dict[str, Copy] = field(default_factory=dict)  # same size, not ours: compared by hash
    mkdirs: list[str] = field(default_factory=list)
    manifest: Manifest = field(default_factory=lambda: Manifest())

    @property
    def nothing(self) -> bool:
        return all(i.empty for i in self.items)

    @property
    def bytes(self) -> int:
        return sum(i.bytes for i in self.items)

    @property
    def files(self) -> int:
        return sum(len(i.copies) for i in self.items)


def remote_root(item: Item, paths: HostPaths, ctl: Controller) -> str:
    """Where ``item`` goes on a host with ``paths``."""
    if not paths.deployed:
        return item.root
    return {
        "source": paths.src,
        "python packages": paths.site_packages,
        "python environment": paths.venv,
        "listener jar": paths.cache,
        "class-data archive": paths.cache,
        "hadoop jars": paths.cache,
        "ndp connector jar": paths.cache,
        "switch": posixpath.dirname(paths.switch),
    }[item.name]


def roots(ctl: Controller, paths: HostPaths, router: bool) -> list[str]:
    """The folders a host's listing covers (what deploy could write below)."""
    out = []
    for item in ctl.items:
        if skipped(item, paths) or (item.name == "switch" and not router):
            continue
        root = remote_root(item, paths, ctl)
        out.append(f"{root}/shufflelab" if item.name == "source" else root)
    return sorted(set(out))


def skipped(item: Item, paths: HostPaths) -> str | None:
    """Why ``item`` is not brought to a host with ``paths`` (None: it is); the controller's lack of a
    virtual environment matters only to a host without a deploy_dir."""
    return None if item.skip == NO_VENV and paths.deployed else item.skip


def _ancestors(path: str) -> list[str]:
    out = []
    p = posixpath.dirname(path)
    while p not in ("/", ""):
        out.append(p)
        p = posixpath.dirname(p)
    return out


def plan_host(host: str, paths: HostPaths, ctl: Controller, remote: Remote, router: bool) -> HostPlan:
    """What ``host`` needs (pure): refusals naming the item, and per item what to copy."""
    plan = HostPlan(host, paths, manifest=remote.manifest)
    if remote.java is None:
        plan.refusals.append("java: not found on the host's PATH (deploy does not bring Java: install a JDK)")
    elif java_feature(remote.java) != ctl.java_feature:
        plan.refusals.append(
            f"java: {remote.java} on the host, {ctl.java} on the controller (the feature versions must be equal; "
            "deploy does not bring Java)"
        )
    same_minor = {p: f for p, f in remote.pythons.items() if f[0][:2] == ctl.python[:2]}
    if not same_minor:
        found = ", ".join(f"{p} {'.'.join(map(str, f[0]))}" for p, f in remote.pythons.items()) or "none"
        plan.refusals.append(
            f"python: no Python {ctl.minor} on the host (found: {found}); deploy does not bring Python"
        )
    else:
        plan.python, (_, machine, libc_name, libc_version) = next(iter(same_minor.items()))
        if machine != ctl.machine:
            plan.refusals.append(
                f"cpu architecture: {machine} on the host, {ctl.machine} on the controller "
                "(the packages hold compiled code)"
            )
        if libc_name != ctl.libc[0]:
            plan.refusals.append(
                f"libc: {libc_name or 'not glibc'} on the host, {ctl.libc[0] or 'not glibc'} on the controller "
                "(the packages' compiled code needs the controller's)"
            )
        elif ctl.libc[1] and _version(libc_name and libc_version) < _version(ctl.libc[1]):
            plan.refusals.append(
                f"libc: {libc_name} {libc_version} on the host, older than the controller's {ctl.libc[1]}"
            )
    entries = remote.entries
    for item in ctl.items:
        ip = ItemPlan(item.name, skip=skipped(item, paths))
        if item.name == "switch" and not router:
            continue
        if item.name == "class-data archive" and not item.skip:
            if paths.deployed:
                ip.skip = "recorded for the controller's class path; the JVMs there start without it (-Xshare:auto)"
            elif remote.java != ctl.java:
                ip.skip = f"recorded with Java {ctl.java}, the host has {remote.java}; the JVMs there start without it"
        plan.items.append(ip)
        if ip.skip:
            continue
        root = remote_root(item, paths, ctl)
        differ: list[str] = []
        for f in item.files:
            dest = f"{root}/{f.rel}"
            e = entries.get(dest)
            c = Copy(f.path, dest, f.size, f.mtime)
            if e is None:
                ip.copies.append(c)
            elif e.kind != "f":
                differ.append(f"{dest} (not a file)")
            elif e.size == f.size and e.mtime == f.mtime:
                ip.present += 1
            elif remote.manifest.owns(dest):
                ip.copies.append(c)  # deploy put an older one there
            elif e.size == f.size:
                plan.unsure[dest] = c  # the hash decides (see resolve_unsure)
                ip.present += 1
            else:
                differ.append(dest)
        for rel, target in item.links:
            dest = f"{root}/{rel}"
            want = plan.python or "" if target == "{python}" else target
            e = entries.get(dest)
            if e is None or (remote.manifest.owns(dest) and (e.kind != "l" or e.target != want)):
                ip.links.append((dest, want))
            else:
                ip.present += 1
        for rel, text in item.texts:
            dest = f"{root}/{rel}"
            want = text.replace("{home}", posixpath.dirname(plan.python or ""))
            e = entries.get(dest)
            if e is None or (remote.manifest.owns(dest) and remote.texts.get(dest) != want):
                ip.texts.append((dest, want))
            else:
                ip.present += 1
        if differ:
            more = f" and {len(differ) - 3} more" if len(differ) > 3 else ""
            plan.refusals.append(
                f"{item.name}: {len(differ)} files differ from the controller's and were not put there by deploy "
                f"({', '.join(differ[:3])}{more}); update them, or give the host a deploy_dir"
            )
    if plan.refusals:
        return plan
    existing = {p for p, e in entries.items() if e.kind == "d"}
    needed: set[str] = set()
    for ip in plan.items:
        for dest in [c.remote for c in ip.copies] + [d for d, _ in ip.links] + [d for d, _ in ip.texts]:
            needed.update(_ancestors(dest))
    plan.mkdirs = sorted(needed - existing, key=lambda p: (p.count("/"), p))
    return plan


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text or "")[:3])


def resolve_unsure(plan: HostPlan, remote_hashes: Mapping[str, str], local_hash: Callable[[str], str]) -> None:
    """Files of the same size deploy did not put there: equal hashes are there, others refused."""
    differ = [dest for dest, c in plan.unsure.items() if remote_hashes.get(dest) != local_hash(c.local)]
    plan.unsure = {}
    if differ:
        more = f" and {len(differ) - 3} more" if len(differ) > 3 else ""
        plan.refusals.append(
            f"{len(differ)} files differ from the controller's and were not put there by deploy "
            f"({', '.join(differ[:3])}{more}); update them, or give the host a deploy_dir"
        )


def parse_probe(text: str) -> Remote:
    sections: dict[str, list[str]] = {}
    current = ""
    for line in text.split("\n"):
        if line.startswith("==") and line[2:] in ("java", "python", "manifest", "texts", "entries"):
            current = line[2:]
            sections[current] = []
        elif current:
            sections[current].append(line)
    java = parse_java_version("\n".join(sections.get("java", [])))
    pythons: dict[str, tuple[tuple[int, int, int], str, str, str]] = {}
    for line in sections.get("python", []):
        parts = line.split("\t")
        if len(parts) == 5 and re.fullmatch(r"\d+\.\d+\.\d+", parts[1]):
            v = tuple(int(x) for x in parts[1].split("."))
            pythons.setdefault(parts[0], ((v[0], v[1], v[2]), parts[2], parts[3].strip("-"), parts[4].strip("-")))
    manifest = Manifest.parse("\n".join(sections.get("manifest", [])))
    texts: dict[str, str] = {}
    name = None
    for line in sections.get("texts", []):
        if line.startswith("@@"):
            name = line[2:]
            texts[name] = ""
        elif name is not None:
            texts[name] += line + "\n"
    entries: dict[str, Entry] = {}
    for line in sections.get("entries", []):
        parts = line.split("\t")
        if len(parts) != 5:
            continue
        try:
            entries[parts[3]] = Entry(parts[0], int(parts[1]), int(float(parts[2])), parts[4])
        except ValueError:
            continue
    return Remote(java, pythons, entries, manifest, {k: v.rstrip("\n") + "\n" for k, v in texts.items()})


def python_candidates(ctl: Controller, paths: HostPaths) -> list[str]:
    cands = [] if paths.deployed else [paths.python]
    return [*cands, ctl.base_python, f"python{ctl.minor}", "python3"]


def describe_plan(plan: HostPlan) -> list[tuple[str, str]]:
    """(item, what) rows for the CLI and doctor."""
    return [(ip.name, ip.summary()) for ip in plan.items]


def quoted(paths: Sequence[str]) -> str:
    return " ".join(shlex.quote(p) for p in paths)
