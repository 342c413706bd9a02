"""``shufflelab deploy --hosts``: bring each inventory host what a run there needs, over SFTP only.

What a run starts on a host (:class:`HostPaths`): the project's source tree (``src/`` of the
running checkout), a Python environment holding the packages the remote entry points import
(pyspark and its dependencies, found by importing those entry points in the controller's
interpreter), the listener jar, the class-data archive when it can be reused, and the userspace
switch on the router host. Where they go: a host's ``deploy_dir`` (inventory ``hosts.NAME.deploy_dir``
or ``ssh.deploy_dir``) holds ``src/``, ``venv/`` (a virtual environment made of a ``pyvenv.cfg``,
``bin/python`` linked to the host's own Python of the controller's minor version, and
``lib/pythonX.Y/site-packages``), ``cache/`` and ``bin/``; without one, everything goes to the
controller's own paths (the checkout, its venv, ``~/.cache/shufflelab``), as a run without deploy
expects.

A file is there when the host has it at its place with the controller's size and modification
time (SFTP copies keep both), or -- for a file deploy did not put there -- the same SHA-256. Files
that differ and that deploy did not create are refused, never overwritten. What cannot be brought
is refused naming the host and the item: no Java or another Java feature version, no Python of the
controller's minor version, another CPU architecture or C library.

Every host keeps a manifest of exactly what deploy created there (files, links, folders) next to
its lease folder (:func:`manifest_path`); ``deploy --remove`` removes that and nothing else
(besides Python's byte-code caches of the deployed modules, in the folders deploy created).

Planning (:func:`plan_host`) is pure; :func:`probe_host`, :func:`apply_plan` and :func:`remove_host`
talk to the host.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import json
import os
import platform
import posixpath
import re
import shlex
import subprocess
import sys
import sysconfig
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import asyncssh

from shufflelab.hosts.control import HostError, Session
from shufflelab.hosts.inventory import Inventory, InventoryHost

MANIFEST_NAME = "deploy.json"
MANIFEST_FORMAT = 1
_COPIES_PER_HOST = 8

# what runs on a host: the driver (and the workloads it runs), the queue sampler (and the netlink
# library it imports only once it samples), pyspark's workers
_ENTRY_MODULES = (
    "shufflelab.workloads.driver",
    "shufflelab.workloads",
    "shufflelab.emulate.sampler",
    "pyroute2",
    "pyspark.sql",
    "pyspark.daemon",
    "pyspark.worker",
)


_NO_VENV = "the controller runs no virtual environment: the host's interpreter at the same path"


class DeployError(RuntimeError):
    """Deploy refused or failed; the message names the host and the item."""


# -- the controller ------------------------------------------------------------------------------


def switch_binary() -> str:
    """Where the switch binary is on the controller, so on every host without a ``deploy_dir``
    (the same checkout): the built one, else where ``make setup`` builds it."""
    from shufflelab.switch.controller import _REPO, BINARY_NAME, binary_path

    found = binary_path()
    return str(found if found is not None else _REPO / "target" / "release" / BINARY_NAME)


@functools.cache
def source_root() -> str:
    """``src/`` of the running checkout (the folder that holds the ``shufflelab`` package)."""
    import shufflelab

    return str(Path(shufflelab.__file__).resolve().parent.parent)


def _executable_rel() -> str:
    rel = os.path.relpath(sys.executable, sys.prefix)
    return rel if not rel.startswith("..") else "bin/python"


def _site_rel() -> str:
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
            python=f"{venv}/{_executable_rel()}",
            pythonpath=f"{deploy_dir}/src",
            src=f"{deploy_dir}/src",
            venv=venv,
            site_packages=f"{venv}/{_site_rel()}",
            cache=f"{deploy_dir}/cache",
            switch=f"{deploy_dir}/bin/shufflelab-switch",
            deployed=True,
        )


def pythonpath(paths: HostPaths) -> str:
    return paths.pythonpath if paths.pythonpath is not None else os.pathsep.join(p for p in sys.path if p)


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


def _scan(root: Path, rels: Iterable[str]) -> tuple[LocalFile, ...]:
    out = []
    for rel in sorted(set(rels)):
        p = root / rel
        try:
            st = p.stat()
        except OSError:
            continue
        if p.is_file():
            out.append(LocalFile(str(p), rel, st.st_size, int(st.st_mtime), st.st_mode & 0o777))
    return tuple(out)


def _tree(root: Path) -> list[str]:
    rels = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for f in filenames:
            if not f.endswith((".pyc", ".pyo")):
                rels.append(os.path.relpath(os.path.join(dirpath, f), root))
    return rels


_CLOSURE = r"""
import importlib, importlib.metadata as md, json, re, sys, sysconfig
for m in sys.argv[1:]:
    importlib.import_module(m)
sp = sysconfig.get_paths()["purelib"] + "/"
files = [getattr(m, "__file__", None) for m in list(sys.modules.values())]
tops = {f[len(sp):].split("/")[0].split(".")[0] for f in files if isinstance(f, str) and f.startswith(sp)}
owners = md.packages_distributions()
names = {d for t in tops for d in owners.get(t, [])} | {"pyspark"}
todo, seen = sorted(names), set()
while todo:
    n = todo.pop()
    key = re.sub(r"[-_.]+", "-", n).lower()
    if key in seen:
        continue
    seen.add(key)
    try:
        dist = md.distribution(n)
    except md.PackageNotFoundError:
        continue
    for r in dist.requires or []:
        if "extra ==" in r:
            continue
        m = re.match(r"[A-Za-z0-9_.-]+", r)
        if m:
            todo.append(m.group(0))
print(json.dumps(sorted(seen)))
"""


def needed_distributions() -> list[str]:
    """The distributions whose modules the remote entry points import (in a fresh interpreter of
    the controller's), with their requirements; shufflelab itself (its source tree is an item of
    its own) and setuptools left out."""
    env = {**os.environ, "PYTHONPATH": source_root()}
    r = subprocess.run(
        [sys.executable, "-c", _CLOSURE, *_ENTRY_MODULES], capture_output=True, text=True, env=env, timeout=120
    )
    if r.returncode != 0:
        raise DeployError(f"finding the Python packages a run needs failed: {r.stderr.strip()[-1500:]}")
    return [n for n in json.loads(r.stdout) if n not in ("shufflelab", "setuptools", "pip")]


def package_files(dists: Sequence[str]) -> tuple[LocalFile, ...]:
    import importlib.metadata as md

    site = Path(sysconfig.get_paths()["purelib"])
    rels: list[str] = []
    for n in dists:
        try:
            dist = md.distribution(n)
        except md.PackageNotFoundError:
            continue
        for f in dist.files or []:
            rel = str(f)
            if rel.startswith("..") or "__pycache__" in rel or rel.endswith((".pyc", ".pyo")):
                continue
            if Path(str(dist.locate_file(f))).resolve().is_relative_to(site.resolve()):
                rels.append(rel)
    return _scan(site, rels)


@functools.cache
def controller() -> Controller:
    """What this machine runs, and the items a host needs (a subprocess or two: java, the imports)."""
    from shufflelab import jvm, listener
    from shufflelab.emulate import cds
    from shufflelab.switch.controller import binary_path

    try:
        java = parse_java_version(jvm.java_version())
    except OSError:
        java = None
    base = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    src = Path(source_root())
    items = [Item("source", str(src), _scan(src, (f"shufflelab/{r}" for r in _tree(src / "shufflelab"))))]
    items.append(Item("python packages", sysconfig.get_paths()["purelib"], package_files(needed_distributions())))
    cfg = f"home = {{home}}\ninclude-system-site-packages = false\nversion = {platform.python_version()}\n"
    env = Item("python environment", sys.prefix, links=((_executable_rel(), "{python}"),), texts=(("pyvenv.cfg", cfg),))
    # without a virtual environment here, a host without a deploy_dir runs its interpreter at the same path
    items.append(env if sys.prefix != sys.base_prefix else dataclasses.replace(env, skip=_NO_VENV))
    cache = artifacts_root()
    jar = listener.jar_path()
    if jar.exists():
        items.append(Item("listener jar", str(cache), _scan(cache, [jar.name])))
    else:
        items.append(Item("listener jar", str(cache), skip=f"{jar} is not built here (make setup builds it)"))
    archive = cds.archive_path()
    if archive.exists():
        items.append(Item("class-data archive", str(cache), _scan(cache, [archive.name])))
    switch = binary_path()
    if switch is not None:
        items.append(Item("switch", str(switch.parent), _scan(switch.parent, [switch.name])))
    else:
        items.append(Item("switch", "", skip="not built here (cargo build --release -p shufflelab-switch)"))
    libc = platform.libc_ver()
    return Controller(sys.version_info[:3], platform.machine(), (libc[0], libc[1]), java, tuple(items), base)


def artifacts_root() -> Path:
    from shufflelab import artifacts

    return artifacts.cache_root()


# -- a host ----------------------------------------------------------------------------------


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
        "switch": posixpath.dirname(paths.switch),
    }[item.name]


def roots(ctl: Controller, paths: HostPaths, router: bool) -> list[str]:
    """The folders a host's listing covers (what deploy could write below)."""
    out = []
    for item in ctl.items:
        if _skipped(item, paths) or (item.name == "switch" and not router):
            continue
        root = remote_root(item, paths, ctl)
        out.append(f"{root}/shufflelab" if item.name == "source" else root)
    return sorted(set(out))


def _skipped(item: Item, paths: HostPaths) -> str | None:
    return None if item.skip == _NO_VENV and paths.deployed else item.skip


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
        ip = ItemPlan(item.name, skip=_skipped(item, paths))
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


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# -- over SSH --------------------------------------------------------------------------------

_PY = (
    "import platform, sys; v = platform.libc_ver(); "
    'print("%d.%d.%d" % sys.version_info[:3], platform.machine(), v[0] or "-", v[1] or "-", sep="\\t")'
)
_PROBE = r"""
m="$1"; shift; n="$1"; shift
echo ==java; java -version 2>&1 | grep -m1 'version "' || true
echo ==python
i=0; while [ $i -lt "$n" ]; do
  p="$1"; shift; i=$((i+1))
  full=$(command -v "$p" 2>/dev/null) || continue
  printf '%s\t' "$full"
  "$full" -c "$PY" 2>/dev/null || echo
done
echo ==manifest; cat "$m" 2>/dev/null || true
echo ==texts
for t in "$@"; do case "$t" in *.cfg) [ -f "$t" ] && { printf '%s\n' "@@$t"; cat "$t"; };; esac; done
echo ==entries
for r in "$@"; do
  case "$r" in *.cfg) continue;; esac
  p="$r"; while [ "$p" != / ] && [ -n "$p" ]; do [ -d "$p" ] && printf 'd\t0\t0\t%s\t\n' "$p"; p=$(dirname "$p"); done
  [ -d "$r" ] && find "$r" -mindepth 1 -printf '%y\t%s\t%T@\t%p\t%l\n' 2>/dev/null
done
true
"""


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


async def probe_host(session: Session, inv: Inventory, ctl: Controller) -> tuple[HostPaths, Remote]:
    paths = HostPaths.of(session.host)
    router = inv.router == session.name
    cands = python_candidates(ctl, paths)
    cfgs = [
        f"{remote_root(i, paths, ctl)}/pyvenv.cfg"
        for i in ctl.items
        if i.name == "python environment" and not _skipped(i, paths)
    ]
    argv = [
        "env",
        f"PY={_PY}",
        "sh",
        "-c",
        _PROBE,
        "sh",
        manifest_path(inv),
        str(len(cands)),
        *cands,
        *roots(ctl, paths, router),
        *cfgs,
    ]
    r = await session.run("probe for deploy", argv, privileged=True)
    return paths, parse_probe(r.stdout)


async def plan_on(session: Session, inv: Inventory, ctl: Controller) -> HostPlan:
    """Probe ``session``'s host and plan what it needs (hashes of same-size files it has compared)."""
    paths, remote = await probe_host(session, inv, ctl)
    plan = plan_host(session.name, paths, ctl, remote, inv.router == session.name)
    if plan.unsure and not plan.refusals:
        names = "\n".join(plan.unsure) + "\n"
        r = await session.run(
            "hash files for deploy",
            ["sh", "-c", 'tr "\\n" "\\0" | xargs -0 -r sha256sum'],
            input=names,
            check=False,
            timeout_s=max(session.timeout_s, 600),
        )
        hashes = {}
        for line in r.stdout.splitlines():
            h, _, path = line.partition("  ")
            hashes[path] = h
        resolve_unsure(plan, hashes, sha256)
    return plan


async def apply_plan(
    session: Session, inv: Inventory, plan: HostPlan, progress: Callable[[int], None] | None = None
) -> Manifest:
    """Bring what ``plan`` says over SFTP; the host's manifest records it (written after every stage,
    so an interrupted deploy is still removed exactly)."""
    manifest = plan.manifest
    where = manifest_path(inv)
    if plan.nothing:
        return manifest

    async def save() -> None:
        await session.write_file("write the deploy manifest", where, manifest.to_json(), mode="644")

    step = "deploy"
    session.check_alive(step)
    try:
        async with session.conn.start_sftp_client() as sftp:
            for d in plan.mkdirs:
                if d not in manifest.dirs:
                    manifest.dirs.append(d)
            await save()  # before anything is created: what will be is recorded
            for d in plan.mkdirs:
                try:
                    await sftp.mkdir(d)
                except asyncssh.SFTPFailure:
                    if not await sftp.isdir(d):
                        raise
            copies = [c for ip in plan.items for c in ip.copies]
            for c in copies:
                manifest.files[c.remote] = [c.size, c.mtime]
            for ip in plan.items:
                for dest, target in ip.links:
                    manifest.links[dest] = target
                for dest, text in ip.texts:
                    manifest.texts[dest] = len(text.encode())
            await save()
            gate = asyncio.Semaphore(_COPIES_PER_HOST)

            async def one(c: Copy) -> None:
                async with gate:
                    # (asyncssh sizes the writes to what the server accepts: OpenSSH's limits extension)
                    limit = session.timeout_s + c.size / 1e6  # a stuck copy fails (at least 1 MB/s)
                    try:
                        async with asyncio.timeout(limit):
                            await sftp.put(c.local, c.remote, preserve=True)
                    except TimeoutError:
                        session.check_alive(step)
                        raise HostError(
                            session.name, session.host.address, step, f"SFTP put {c.remote}: not done in {limit:.0f} s"
                        ) from None
                    except (asyncssh.Error, OSError) as exc:
                        session.check_alive(step)
                        raise HostError(
                            session.name, session.host.address, step, f"SFTP put {c.local} -> {c.remote}: {exc}"
                        ) from None
                    if progress is not None:
                        progress(c.size)

            await asyncio.gather(*(one(c) for c in copies))
            for ip in plan.items:
                for dest, target in ip.links:
                    if await sftp.lexists(dest):
                        await sftp.remove(dest)
                    await sftp.symlink(target, dest)
                for dest, text in ip.texts:
                    async with sftp.open(dest, "w") as fh:
                        await fh.write(text)
    except (asyncssh.Error, OSError) as exc:
        session.check_alive(step)
        raise HostError(session.name, session.host.address, step, f"SFTP: {exc}") from None
    return manifest


@dataclass
class Removed:
    host: str
    files: int = 0
    dirs: int = 0
    kept: list[str] = field(default_factory=list)  # folders deploy created that are not empty now


async def remove_host(session: Session, inv: Inventory) -> Removed:
    """Remove what the host's manifest records deploy created, then the manifest."""
    where = manifest_path(inv)
    r = await session.run("read the deploy manifest", ["cat", where], check=False, privileged=True)
    out = Removed(session.name)
    if r.exit_status != 0:
        return out
    try:
        manifest = Manifest.parse(r.stdout)
    except DeployError as exc:
        raise HostError(session.name, session.host.address, "read the deploy manifest", str(exc)) from None
    step = "remove what deploy created"
    try:
        async with session.conn.start_sftp_client() as sftp:
            for path in [*manifest.files, *manifest.links, *manifest.texts]:
                try:
                    await sftp.remove(path)
                    out.files += 1
                except asyncssh.SFTPNoSuchFile:
                    pass
    except (asyncssh.Error, OSError) as exc:
        session.check_alive(step)
        raise HostError(session.name, session.host.address, step, f"SFTP: {exc}") from None
    # Python's byte-code caches of the deployed modules, in the folders deploy created; then the
    # folders, deepest first, where empty
    dirs = sorted(manifest.dirs, key=lambda p: (-p.count("/"), p))
    if dirs:
        script = (
            'for d in "$@"; do [ -d "$d/__pycache__" ] && rm -rf -- "$d/__pycache__"; '
            'if [ -d "$d" ]; then rmdir -- "$d" 2>/dev/null && echo "removed $d" || echo "kept $d"; fi; done; true'
        )
        res = await session.run(step, ["sh", "-c", script, "sh", *dirs], timeout_s=max(session.timeout_s, 300))
        for line in res.stdout.splitlines():
            if line.startswith("removed "):
                out.dirs += 1
            elif line.startswith("kept "):
                out.kept.append(line[5:])
    await session.run("remove the deploy manifest", ["rm", "-f", "--", where], privileged=True)
    return out


def describe_plan(plan: HostPlan) -> list[tuple[str, str]]:
    """(item, what) rows for the CLI and doctor."""
    return [(ip.name, ip.summary()) for ip in plan.items]


def quoted(paths: Sequence[str]) -> str:
    return " ".join(shlex.quote(p) for p in paths)
