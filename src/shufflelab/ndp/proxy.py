"""The NDP proxy: a service in front of WebHDFS on each storage (DataNode) host.

Run it inside the storage host's namespace (with :class:`~shufflelab.emulate.netns.NamespaceProcess`)::

    python -m shufflelab.ndp.proxy --listen 10.0.0.2:9880 --webhdfs http://10.0.0.1:9870 [--workers N] [--max-queue M]

It serves three things:

``/webhdfs/v1/...`` (any method)
    Forwarded to the NameNode untouched: method, path, query, end-to-end headers and the body,
    streamed both ways. Hop-by-hop headers (``Connection``, ``Transfer-Encoding``, ``Expect``, ...)
    belong to each connection and are not copied; nothing is added. The NameNode's redirects to a
    DataNode (``OPEN``, ``CREATE``, ``APPEND``) are passed back *as they are*: the client then talks
    to the DataNode itself, exactly as without the proxy. Paths with ``.``/``..`` segments (also
    percent-encoded) are refused, so nothing outside ``/webhdfs/v1/`` on the NameNode is reachable.
    Bodies are not decoded (a ``Content-Encoding`` goes through with the bytes it describes); a body
    that breaks off is the client's 400 and one that stalls for ``BODY_TIMEOUT_S`` (also what a
    broken chunked framing leaves behind) its 408, not the NameNode's 502/504.

``POST /ndp/v1/<hdfs path>`` -- a pushdown
    Body: ``{"plan": <plan document>, "schema": {column: type}, "row_groups": [i, ...]}``
    (``row_groups`` optional: only these Parquet row groups of the file), not content-encoded (415).
    The path is the percent-decoded request path, which must be UTF-8. The body is parsed and
    checked first (:func:`parse_request`: size, strict JSON, valid Unicode, no duplicate keys, known
    fields, the plan by :func:`~shufflelab.ndp.plan.parse` and :func:`~shufflelab.ndp.plan.validate`
    against the declared schema, literals within what the engine holds); a bad one gets 400
    ``{"error", "field"}`` (413 when too large) before it takes a place in the queue. Admitted
    requests wait for one of ``--workers`` slots (503 when ``--max-queue`` are already waiting).
    In its slot a request reads the file from the NameNode's redirect -- followed only to this
    host's DataNode (``--datanode``, by default the listen address on port 9864), which holds a
    replica when replication covers every DataNode -- streaming it to a spool file, checks the
    file's Parquet schema against the declared one, executes the plan with
    :func:`shufflelab.ndp.execute.run` (DuckDB, one thread per worker, reading only the columns and
    row groups it needs) in a thread pool of ``--workers`` threads, and answers Arrow IPC
    (``application/vnd.apache.arrow.stream``) with the statistics in ``X-NDP-*`` headers. The whole
    result is computed before the status line is sent, so a plan that cannot be computed on the
    file's values (an arithmetic overflow) still gets its 422 naming the plan part. The only
    request a pushdown makes to HDFS is a ``GET ...?op=OPEN``.

``GET /ndp/v1/status``
    Load of this storage node for the Net-Aware planner: ``queued`` (waiting for a slot),
    ``running``, ``workers``, ``drain_per_s`` (pushdown completions per second of busy time, an
    EWMA over recent completions), ``service_s`` (EWMA of one pushdown's time in its slot),
    ``completed``, ``rejected`` (503: queue full) and the other counters.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import shutil
import signal
import sys
import tempfile
import time
import urllib.parse
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pyarrow as pa
import pyarrow.parquet as pq
from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

from shufflelab.ndp import execute as X
from shufflelab.ndp import plan as P
from shufflelab.ndp.load import DrainMeter, usable_cpus
from shufflelab.ndp.pushdown_request import (
    MAX_BODY_BYTES,
    BodyTooLarge,
    PushdownRequest,
    check_file_schema,
    parse_request,
    request_path,
)

DEFAULT_PORT = 9880
DATANODE_HTTP_PORT = 9864  # hdfs_config.DN_HTTP_PORT (not imported: keeps this module light)
ARROW_STREAM = "application/vnd.apache.arrow.stream"
# RFC 9110 section 7.6.1: these describe one connection and are never forwarded; Expect is answered by
# the proxy itself (100-continue), Host names the proxy.
HOP_BY_HOP = frozenset(
    h.lower()
    for h in (
        "Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization",
        "TE", "Trailer", "Transfer-Encoding", "Upgrade", "Expect", "Host",
    )
)  # fmt: skip
REDIRECTS = (301, 302, 303, 307, 308)
CHUNK = 1 << 20
# a pushdown body (at most MAX_BODY_BYTES) must arrive within this; a forwarded one may pause this long
BODY_TIMEOUT_S = 30.0


# -- the service ---------------------------------------------------------------------------------
@dataclass
class ProxyConfig:
    """What a proxy needs; ``datanodes`` are the ``host:port`` a NameNode redirect may send a
    pushdown's read to (the local DataNode)."""

    webhdfs: str  # http://<namenode>:9870
    datanodes: frozenset[str]
    workers: int = field(default_factory=usable_cpus)
    max_queue: int = 16
    user: str = "root"
    spool: Path = field(default_factory=lambda: Path(tempfile.gettempdir()))
    max_read_bytes: int = 1 << 30
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 120.0
    exec_timeout_s: float = 300.0  # one pushdown's execution (0: no limit)

    def __post_init__(self) -> None:
        u = urllib.parse.urlsplit(self.webhdfs)
        if u.scheme != "http" or not u.hostname or u.path not in ("", "/") or u.query:
            raise ValueError(f"webhdfs: {self.webhdfs!r} must be http://<namenode address>:<port>")
        self.webhdfs = f"http://{u.netloc}"
        if not 1 <= self.workers <= 256:
            raise ValueError(f"workers: {self.workers} must be between 1 and 256")
        if not 0 <= self.max_queue <= 100_000:
            raise ValueError(f"max_queue: {self.max_queue} must be between 0 and 100000")
        for d in self.datanodes:
            host, _, port = d.rpartition(":")
            if not host or not port.isdigit():
                raise ValueError(f"datanode: {d!r} must be <address>:<port>")
        if not self.user or not set(self.user) <= P.NAME_CHARS | set("-.ABCDEFGHIJKLMNOPQRSTUVWXYZ"):
            raise ValueError(f"user: {self.user!r} is not a plain user name")
        if self.max_read_bytes < 1:
            raise ValueError("max_read_bytes must be positive")
        if not 0 <= self.exec_timeout_s <= 86_400:
            raise ValueError(f"exec_timeout_s: {self.exec_timeout_s} must be between 0 (no limit) and 86400")


class UpstreamError(Exception):
    """HDFS answered a pushdown's read with an error: ``status`` is what the client gets."""

    def __init__(self, status: int, error: str, field: str = "path") -> None:
        super().__init__(error)
        self.status = status
        self.error = error
        self.field = field


def _error(status: int, error: str, field: str | None = None, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response({"error": error, "field": field}, status=status, headers=headers)


class BodyStalled(Exception):
    """A forwarded request's body stopped arriving (HTTP 408)."""


async def _body_chunks(request: web.Request) -> AsyncIterator[bytes]:
    """The request body as it arrives, each chunk within :data:`BODY_TIMEOUT_S` of the last: a body
    that stalls (or whose chunked framing broke, which aiohttp leaves as a body that never ends) is
    the client's 408, not an upstream timeout."""
    while True:
        try:
            chunk = await asyncio.wait_for(request.content.readany(), BODY_TIMEOUT_S)
        except TimeoutError:
            raise BodyStalled(f"the request body stalled for {BODY_TIMEOUT_S:g} s") from None
        if not chunk:
            return
        yield chunk


def _client_body_error(exc: BaseException) -> BaseException | None:
    """The incoming request's body error behind an upstream client error, if that is its cause."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        if isinstance(e, web.RequestPayloadError | BodyStalled):
            return e
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return None


def _end_to_end(headers: Any) -> CIMultiDict[str]:
    """Copy of ``headers`` without the hop-by-hop ones (and those named in ``Connection``)."""
    named = {t.strip().lower() for v in headers.getall("Connection", []) for t in v.split(",")}
    out: CIMultiDict[str] = CIMultiDict()
    for k, v in headers.items():
        if k.lower() not in HOP_BY_HOP and k.lower() not in named:
            out.add(k, v)
    return out


class NdpProxy:
    """The proxy's state and handlers; :meth:`app` is the aiohttp application."""

    def __init__(self, config: ProxyConfig) -> None:
        self.config = config
        self.queued = 0
        self.running = 0
        self.counters = {
            "completed": 0, "rejected": 0, "invalid": 0, "not_found": 0, "failed": 0, "timed_out": 0, "forwarded": 0,
            "bytes_read": 0, "bytes_out": 0,
        }  # fmt: skip
        self.meter = DrainMeter()
        self.started = time.monotonic()
        self._slots: asyncio.Semaphore | None = None
        self._session: aiohttp.ClientSession | None = None
        self._pool: ThreadPoolExecutor | None = None
        self.spool_dir: Path | None = None

    # -- lifecycle --------------------------------------------------------------------------------
    def app(self) -> web.Application:
        # bodies are never decoded: forwarded ones keep their Content-Encoding and bytes, pushdowns refuse one
        app = web.Application(client_max_size=MAX_BODY_BYTES, handler_args={"auto_decompress": False})
        app.router.add_get("/ndp/v1/status", self.status)
        app.router.add_post("/ndp/v1/{path:.*}", self.pushdown)
        app.router.add_route("*", "/webhdfs/v1{tail:(/.*)?}", self.forward)
        app.on_startup.append(self._startup)
        app.on_cleanup.append(self._cleanup)
        return app

    async def _startup(self, app: web.Application) -> None:
        cfg = self.config
        self._slots = asyncio.Semaphore(cfg.workers)
        self._pool = ThreadPoolExecutor(max_workers=cfg.workers, thread_name_prefix="ndp-worker")
        cfg.spool.mkdir(parents=True, exist_ok=True)
        self.spool_dir = Path(tempfile.mkdtemp(prefix="ndp-proxy-", dir=cfg.spool))
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None, connect=cfg.connect_timeout_s, sock_read=cfg.read_timeout_s),
            auto_decompress=False,
            cookie_jar=aiohttp.DummyCookieJar(),  # one client's cookies never reach another's request
            trust_env=False,  # never an HTTP proxy from the environment
            connector=aiohttp.TCPConnector(limit=64, force_close=False),
        )

    async def _cleanup(self, app: web.Application) -> None:
        if self._session is not None:
            await self._session.close()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        if self.spool_dir is not None:
            shutil.rmtree(self.spool_dir, ignore_errors=True)

    # -- status ---------------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        m = self.meter
        return {
            "queued": self.queued,
            "running": self.running,
            "workers": self.config.workers,
            "max_queue": self.config.max_queue,
            "drain_per_s": round(m.rate, 6),
            "service_s": None if m.service_s is None else round(m.service_s, 6),
            **self.counters,
            "uptime_s": round(time.monotonic() - self.started, 3),
        }

    async def status(self, request: web.Request) -> web.Response:
        return web.json_response(self.snapshot(), headers={"Cache-Control": "no-store"})

    # -- plain WebHDFS ----------------------------------------------------------------------------
    async def forward(self, request: web.Request) -> web.StreamResponse:
        if any(seg in (".", "..") for seg in request.path.split("/")):
            return _error(400, "'.' and '..' path segments are not forwarded", "path")
        if any(ord(c) < 32 or ord(c) == 127 for c in request.path):
            return _error(400, "control characters in the path are not forwarded", "path")
        assert self._session is not None
        raw = request.rel_url.raw_path
        qs = request.rel_url.raw_query_string
        url = URL(self.config.webhdfs + raw + (f"?{qs}" if qs else ""), encoded=True)
        headers = _end_to_end(request.headers)
        data = _body_chunks(request) if request.body_exists else None
        try:
            upstream = await self._session.request(
                request.method,
                url,
                headers=headers,
                data=data,
                allow_redirects=False,
                skip_auto_headers=("Accept", "Accept-Encoding", "User-Agent", "Content-Type"),
            )
        except TimeoutError:
            return _error(504, f"the NameNode {self.config.webhdfs} did not answer in time")
        except aiohttp.ClientError as exc:
            cause = _client_body_error(exc)
            if isinstance(cause, BodyStalled):
                return _error(408, str(cause), "body")
            if cause is not None:  # the client's body broke off or had bad framing while it was sent on
                return _error(400, f"the request body could not be read: {cause}", "body")
            return _error(502, f"the NameNode {self.config.webhdfs} could not be reached: {exc}")
        self.counters["forwarded"] += 1
        try:
            resp = web.StreamResponse(status=upstream.status, reason=upstream.reason)
            resp.headers.extend(_end_to_end(upstream.headers))  # repeated headers stay repeated
            if upstream.content_length is not None:
                resp.content_length = upstream.content_length
            await resp.prepare(request)
            try:
                async for chunk in upstream.content.iter_chunked(1 << 16):
                    await resp.write(chunk)
                await resp.write_eof()
            except (TimeoutError, aiohttp.ClientError, ConnectionError):
                # the status line is out: all we can do is cut the connection short
                if request.transport is not None:
                    request.transport.close()
            return resp
        finally:
            upstream.release()

    # -- pushdown -------------------------------------------------------------------------------
    async def _read_body(self, request: web.Request) -> bytes:
        if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
            raise BodyTooLarge("body", f"{request.content_length} bytes, at most {MAX_BODY_BYTES}")
        buf = bytearray()
        while chunk := await request.content.read(1 << 16):
            buf += chunk
            if len(buf) > MAX_BODY_BYTES:
                raise BodyTooLarge("body", f"more than {MAX_BODY_BYTES} bytes")
        return bytes(buf)

    async def pushdown(self, request: web.Request) -> web.Response:
        t_arrive = time.monotonic()
        encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            self.counters["invalid"] += 1
            return _error(415, f"a pushdown body is plain JSON, not {encoding[:40]!r}", "Content-Encoding")
        try:
            path = request_path(request.rel_url.raw_path)
            req = parse_request(await asyncio.wait_for(self._read_body(request), BODY_TIMEOUT_S))
        except TimeoutError:
            self.counters["invalid"] += 1
            return _error(408, f"the request body did not arrive within {BODY_TIMEOUT_S:.0f} s", "body")
        except web.RequestPayloadError as exc:  # broken chunked framing, a body cut short
            self.counters["invalid"] += 1
            return _error(400, f"the request body could not be read: {exc}", "body")
        except BodyTooLarge as exc:
            self.counters["invalid"] += 1
            return _error(413, exc.reason, exc.field)
        except P.PlanError as exc:
            self.counters["invalid"] += 1
            return _error(400, exc.reason, exc.field)
        cfg = self.config
        if self.queued + self.running >= cfg.workers + cfg.max_queue:
            self.counters["rejected"] += 1
            wait = self.snapshot()
            retry = max(1, math.ceil((wait["queued"] + 1) / wait["drain_per_s"])) if wait["drain_per_s"] else 1
            return _error(
                503,
                f"queue full: {self.queued} waiting for {cfg.workers} workers (at most {cfg.max_queue})",
                None,
                headers={"Retry-After": str(min(retry, 3600))},
            )
        assert self._slots is not None
        self.queued += 1
        try:
            await self._slots.acquire()
        finally:
            self.queued -= 1
        try:
            self.running += 1
            self.meter.start()
            t_slot = time.monotonic()
            done = False
            try:
                resp = await self._serve(path, req, queue_s=t_slot - t_arrive)
                done = resp.status == 200
                return resp
            finally:
                self.meter.finish(time.monotonic() - t_slot if done else None)
        finally:
            self.running -= 1
            self._slots.release()

    async def _serve(self, path: str, req: PushdownRequest, queue_s: float) -> web.Response:
        assert self.spool_dir is not None and self._pool is not None
        fd, name = tempfile.mkstemp(dir=self.spool_dir, suffix=".parquet")
        os.close(fd)
        spool = Path(name)
        try:
            t0 = time.monotonic()
            try:
                nread, dn = await self._fetch(path, spool)
            except UpstreamError as exc:
                self.counters["not_found" if exc.status == 404 else "invalid" if exc.status < 500 else "failed"] += 1
                return _error(exc.status, exc.error, exc.field)
            self.counters["bytes_read"] += nread
            read_s = time.monotonic() - t0
            loop = asyncio.get_running_loop()
            conns: list[Any] = []
            job = loop.run_in_executor(self._pool, _execute, req, spool, conns.append)
            try:
                ipc, rows, exec_s = await asyncio.wait_for(asyncio.shield(job), cfg_timeout(self.config))
            except TimeoutError:
                # DuckDB stops at its next check; the slot stays taken until the thread is free again
                for con in conns:
                    with contextlib.suppress(Exception):
                        con.interrupt()
                with contextlib.suppress(Exception):
                    await job
                self.counters["timed_out"] += 1
                return _error(504, f"the pushdown exceeded the execution limit of {self.config.exec_timeout_s:g} s")
            except X.ValueRangeError as exc:  # a valid plan whose arithmetic overflows on this file's values
                self.counters["invalid"] += 1
                return _error(422, exc.reason, f"plan.{exc.field}")
            except P.PlanError as exc:
                self.counters["invalid"] += 1
                status = 422 if exc.field == "path" else 400
                return _error(status, exc.reason, exc.field)
            except Exception as exc:  # noqa: BLE001 - a failed execution answers 500, the proxy stays up
                self.counters["failed"] += 1
                return _error(500, f"execution failed: {type(exc).__name__}: {str(exc)[:500]}")
            self.counters["completed"] += 1
            self.counters["bytes_out"] += len(ipc)
            headers = {
                "Content-Type": ARROW_STREAM,
                "X-NDP-Input-Bytes": str(nread),
                "X-NDP-Output-Bytes": str(len(ipc)),
                "X-NDP-Rows": str(rows),
                "X-NDP-Exec-Seconds": f"{exec_s:.6f}",
                "X-NDP-Read-Seconds": f"{read_s:.6f}",
                "X-NDP-Queue-Seconds": f"{queue_s:.6f}",
                "X-NDP-Datanode": dn,
                "X-NDP-Operators": ",".join(req.plan.operators()),
            }
            return web.Response(body=ipc, headers=headers)
        finally:
            with contextlib.suppress(FileNotFoundError):
                spool.unlink()

    async def _fetch(self, path: str, dest: Path) -> tuple[int, str]:
        """Stream ``path`` into ``dest`` with WebHDFS ``OPEN``, following the NameNode's redirect only
        to a configured DataNode; returns (bytes, the DataNode's host:port)."""
        assert self._session is not None
        cfg = self.config
        q = urllib.parse.urlencode({"op": "OPEN", "user.name": cfg.user})
        url = f"{cfg.webhdfs}/webhdfs/v1{urllib.parse.quote(path, safe='/')}?{q}"
        allowed = {urllib.parse.urlsplit(cfg.webhdfs).netloc, *cfg.datanodes}
        source = urllib.parse.urlsplit(cfg.webhdfs).netloc
        for _ in range(3):
            try:
                async with self._session.get(
                    URL(url, encoded=True), allow_redirects=False, headers={"Accept": "*/*"}
                ) as r:
                    if r.status in REDIRECTS:
                        target = urllib.parse.urljoin(url, r.headers.get("Location", ""))
                        t = urllib.parse.urlsplit(target)
                        if t.scheme != "http" or t.netloc not in allowed:
                            mine = ", ".join(sorted(cfg.datanodes)) or "none configured"
                            raise UpstreamError(
                                502,
                                f"the NameNode sent the read to {t.scheme}://{t.netloc}, which is not this host's "
                                f"DataNode ({mine}): no local replica?",
                            )
                        url, source = target, t.netloc
                        continue
                    if r.status != 200:
                        raise _hdfs_error(r.status, (await r.content.read(4096)).decode("utf-8", "replace"), path)
                    too_big = f"{path} is larger than {cfg.max_read_bytes} bytes, the most this proxy reads"
                    if r.content_length is not None and r.content_length > cfg.max_read_bytes:
                        raise UpstreamError(413, too_big)
                    n = 0
                    with open(dest, "wb") as f:
                        async for chunk in r.content.iter_chunked(CHUNK):
                            n += len(chunk)
                            if n > cfg.max_read_bytes:
                                raise UpstreamError(413, too_big)
                            f.write(chunk)
                    return n, source
            except TimeoutError:
                raise UpstreamError(504, f"reading {path} from HDFS timed out") from None
            except aiohttp.ClientError as exc:
                raise UpstreamError(502, f"reading {path} from HDFS failed: {exc}") from None
        raise UpstreamError(502, f"reading {path}: too many redirects")


def _hdfs_error(status: int, body: str, path: str) -> UpstreamError:
    try:
        rex = json.loads(body)["RemoteException"]
        msg = f"{rex.get('exception', 'error')}: {rex.get('message', '')}"
    except (ValueError, KeyError, TypeError):
        msg = body.strip()[:300] or f"HTTP {status}"
    if status == 404:
        return UpstreamError(404, f"no such file: {path} ({msg[:300]})")
    if status in (400, 403):
        return UpstreamError(status, f"HDFS refused to read {path}: {msg[:300]}")
    return UpstreamError(502, f"HDFS answered {status} reading {path}: {msg[:300]}")


def cfg_timeout(cfg: ProxyConfig) -> float | None:
    return cfg.exec_timeout_s if cfg.exec_timeout_s > 0 else None


def _execute(
    req: PushdownRequest, spool: Path, on_connect: Callable[[Any], None] | None = None
) -> tuple[bytes, int, float]:
    """In a worker thread: check the file's schema, run the plan, serialise the result."""
    try:
        pf = pq.ParquetFile(spool)
    except (pa.ArrowException, OSError) as exc:
        raise P.PlanError("path", f"not a Parquet file: {str(exc)[:200]}") from None
    with pf:
        check_file_schema(req.schema, pf.schema_arrow)
        t0 = time.monotonic()
        if req.row_groups is None:
            table = X.run(req.plan, req.schema, spool, threads=1, on_connect=on_connect)
        else:
            n = pf.num_row_groups
            for i, g in enumerate(req.row_groups):
                if g >= n:
                    raise P.PlanError(f"row_groups.{i}", f"row group {g} does not exist (the file has {n})")
            data = pf.read_row_groups(list(req.row_groups), columns=list(req.schema), use_threads=False)
            table = X.run(req.plan, req.schema, data, threads=1, on_connect=on_connect)
    exec_s = time.monotonic() - t0
    return X.to_ipc(table), table.num_rows, exec_s


# -- command line ---------------------------------------------------------------------------------------
def _host_port(text: str, default_port: int | None = None) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = text, str(default_port or "")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not <address>:<port>")
    return host, int(port)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m shufflelab.ndp.proxy", description=__doc__.split("\n\n")[0])
    ap.add_argument("--listen", required=True, type=_host_port, help=f"IP:PORT to serve on (e.g. :{DEFAULT_PORT})")
    ap.add_argument("--webhdfs", required=True, help="the NameNode's WebHDFS, http://IP:9870")
    ap.add_argument(
        "--datanode",
        action="append",
        default=None,
        help=f"IP:PORT of a DataNode HTTP server a pushdown may read from (repeatable; default: the listen IP, "
        f"port {DATANODE_HTTP_PORT})",
    )
    ap.add_argument("--workers", type=int, default=None, help="parallel pushdowns (default: usable CPUs)")
    ap.add_argument("--max-queue", type=int, default=16, help="pushdowns that may wait for a worker (then 503)")
    ap.add_argument("--user", default=None, help="WebHDFS user.name for pushdown reads (default: this user)")
    ap.add_argument("--spool", type=Path, default=None, help="directory for files being processed")
    ap.add_argument("--max-read-bytes", type=int, default=1 << 30, help="largest file a pushdown reads")
    ap.add_argument(
        "--exec-timeout", type=float, default=300.0, help="seconds one pushdown may execute (then 504; 0: no limit)"
    )
    a = ap.parse_args(argv)
    host, port = a.listen
    dns = a.datanode or [f"{host}:{DATANODE_HTTP_PORT}"]
    try:
        for d in dns:
            _host_port(d)
        cfg = ProxyConfig(
            webhdfs=a.webhdfs,
            datanodes=frozenset(dns),
            workers=a.workers or usable_cpus(),
            max_queue=a.max_queue,
            user=a.user or _user(),
            spool=a.spool or Path(tempfile.gettempdir()),
            max_read_bytes=a.max_read_bytes,
            exec_timeout_s=a.exec_timeout,
        )
    except (ValueError, argparse.ArgumentTypeError) as exc:
        print(f"ndp proxy: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(serve(cfg, host, port))
    except OSError as exc:
        print(f"ndp proxy: cannot serve on {host}:{port}: {exc}", file=sys.stderr)
        return 1
    return 0


async def serve(cfg: ProxyConfig, host: str, port: int) -> None:
    """Serve until SIGTERM or SIGINT; the "listening" line is printed once the socket is bound."""
    proxy = NdpProxy(cfg)
    runner = web.AppRunner(proxy.app(), access_log=None, handle_signals=False, shutdown_timeout=5)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port, backlog=256)
        await site.start()
        print(
            f"ndp proxy listening on {host}:{port}, WebHDFS {cfg.webhdfs}, "
            f"DataNode(s) {', '.join(sorted(cfg.datanodes))}, {cfg.workers} worker(s), queue {cfg.max_queue}",
            flush=True,
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        loop.add_signal_handler(signal.SIGHUP, lambda: None)
        await stop.wait()
        print("ndp proxy stopping", flush=True)
    finally:
        await runner.cleanup()


def _user() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "root"


if __name__ == "__main__":
    sys.exit(main())
