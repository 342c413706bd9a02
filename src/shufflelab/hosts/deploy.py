"""``shufflelab deploy --hosts``: bring each inventory host what a run there needs, over SFTP only.

What a run starts on a host (:class:`~shufflelab.hosts.paths.HostPaths`): the project's source
tree (``src/`` of the running checkout), a Python environment holding the packages the remote
entry points import (pyspark and its dependencies, found by importing those entry points in the
controller's interpreter), the listener jar, the class-data archive when it can be reused, the
workloads' artifacts in the cache that the caller names (:func:`controller`'s ``cached``: the CLI
passes TPC-H/NDP's jars, Hadoop's for the storage hosts' daemons and the NDP connector's) and the
userspace switch on the router host. Where they go: a host's ``deploy_dir`` holds ``src/``,
``venv/`` (a virtual environment made of a ``pyvenv.cfg``, ``bin/python`` linked to the host's own
Python of the controller's minor version, and ``lib/pythonX.Y/site-packages``), ``cache/`` and
``bin/``; without one, everything goes to the controller's own paths, as a run without deploy
expects.

Every host keeps a manifest of exactly what deploy created there (files, links, folders) next to
its lease folder (:func:`~shufflelab.hosts.deploy_plan.manifest_path`); ``deploy --remove`` removes
that and nothing else (besides Python's byte-code caches of the deployed modules, in the folders
deploy created).

The plan -- what to copy, the checks and refusals -- is pure, in :mod:`shufflelab.hosts.deploy_plan`;
this module is its I/O: :func:`controller` scans this machine (a subprocess or two),
:func:`probe_host` and :func:`plan_on` read a host, :func:`apply_plan` copies over SFTP and
:func:`remove_host` removes what the manifest records.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import json
import os
import platform
import subprocess
import sys
import sysconfig
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import asyncssh

from shufflelab import artifacts
from shufflelab.hosts.control import HostError, Session
from shufflelab.hosts.deploy_plan import (
    NO_VENV,
    Controller,
    Copy,
    DeployError,
    HostPlan,
    Item,
    LocalFile,
    Manifest,
    Remote,
    manifest_path,
    parse_java_version,
    parse_probe,
    plan_host,
    python_candidates,
    remote_root,
    resolve_unsure,
    roots,
    skipped,
)
from shufflelab.hosts.deploy_plan import describe_plan as describe_plan  # (the CLI's and doctor's import)
from shufflelab.hosts.inventory import Inventory
from shufflelab.hosts.paths import HostPaths, artifacts_root, executable_rel, source_root

_COPIES_PER_HOST = 32  # SFTP puts in flight per host (docs/benchmarks.md, "Deploy": 32 against 8)

# what runs on a host: the driver (and the workloads it runs), the queue sampler (and the netlink
# library it imports only once it samples), pyspark's workers, TPC-H/NDP's proxy (DuckDB, aiohttp)
# and WebHDFS helper on a storage host
_ENTRY_MODULES = (
    "shufflelab.workloads.driver",
    "shufflelab.workloads",
    "shufflelab.emulate.sampler",
    "pyroute2",
    "pyspark.sql",
    "pyspark.daemon",
    "pyspark.worker",
    "shufflelab.ndp.proxy",
    "shufflelab.ndp.hdfs",
)


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
def controller(cached: Callable[[], Sequence[artifacts.Cached]]) -> Controller:
    """What this machine runs, and the items a host needs (a subprocess or two: java, the imports);
    ``cached()``: the workloads' artifacts in this machine's cache that the hosts read in theirs (named
    by the packages that build them, which this backend does not import)."""
    from shufflelab import jvm, listener
    from shufflelab.emulate import cds

    try:
        java = parse_java_version(jvm.java_version())
    except OSError:
        java = None
    base = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    src = Path(source_root())
    items = [Item("source", str(src), _scan(src, (f"shufflelab/{r}" for r in _tree(src / "shufflelab"))))]
    items.append(Item("python packages", sysconfig.get_paths()["purelib"], package_files(needed_distributions())))
    cfg = f"home = {{home}}\ninclude-system-site-packages = false\nversion = {platform.python_version()}\n"
    env = Item("python environment", sys.prefix, links=((executable_rel(), "{python}"),), texts=(("pyvenv.cfg", cfg),))
    # without a virtual environment here, a host without a deploy_dir runs its interpreter at the same path
    items.append(env if sys.prefix != sys.base_prefix else dataclasses.replace(env, skip=NO_VENV))
    cache = artifacts_root()
    jar = listener.jar_path()
    if jar.exists():
        items.append(Item("listener jar", str(cache), _scan(cache, [jar.name])))
    else:
        items.append(Item("listener jar", str(cache), skip=f"{jar} is not built here (make setup builds it)"))
    archive = cds.archive_path()
    if archive.exists():
        items.append(Item("class-data archive", str(cache), _scan(cache, [archive.name])))
    items += cached_items(cache, cached())
    switch = artifacts.switch_binary()
    if switch is not None:
        items.append(Item("switch", str(switch.parent), _scan(switch.parent, [switch.name])))
    else:
        items.append(Item("switch", "", skip="not built here (cargo build --release -p shufflelab-switch)"))
    libc = platform.libc_ver()
    return Controller(sys.version_info[:3], platform.machine(), (libc[0], libc[1]), java, tuple(items), base)


def cached_items(cache: Path, cached: Iterable[artifacts.Cached]) -> list[Item]:
    """The artifacts ``cached`` (a file or a folder each), in the hosts' caches as in this one
    (``cache``): brought when fetched or built here, else said."""
    out = []
    for c in cached:
        if c.is_here and c.path.is_relative_to(cache):
            rel = c.path.relative_to(cache).as_posix()
            rels = [f"{rel}/{r}" for r in _tree(c.path)] if c.path.is_dir() else [rel]
            out.append(Item(c.name, str(cache), _scan(cache, rels)))
        else:
            out.append(Item(c.name, str(cache), skip=c.missing))
    return out


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


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


async def probe_host(session: Session, inv: Inventory, ctl: Controller) -> tuple[HostPaths, Remote]:
    paths = HostPaths.of(session.host)
    router = inv.router == session.name
    cands = python_candidates(ctl, paths)
    cfgs = [
        f"{remote_root(i, paths, ctl)}/pyvenv.cfg"
        for i in ctl.items
        if i.name == "python environment" and not skipped(i, paths)
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
