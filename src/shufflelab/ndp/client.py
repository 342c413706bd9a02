"""Client of the NDP proxy (:mod:`shufflelab.ndp.proxy`): send a pushdown, get an Arrow table and
the proxy's statistics. Standard library HTTP only (no event loop), bounded timeouts, no redirects.

    c = Client("http://10.0.0.2:9880")
    res = c.pushdown("/tpch/lineitem/part-0.parquet", plan, {"l_quantity": "float", ...})
    res.table, res.stats.input_bytes, res.stats.exec_s

Command line (used inside a fabric host's namespace by the integration test)::

    python -m shufflelab.ndp.client --url http://IP:PORT status
    python -m shufflelab.ndp.client --url http://IP:PORT pushdown /hdfs/path --request body.json --out result.arrow
    python -m shufflelab.ndp.client --url http://IP:PORT send POST /ndp/v1/x --body-file raw.bin

Each prints one JSON object: the status document; ``{"status", "stats"}`` (the table is written to
``--out`` as an Arrow IPC stream) or ``{"status", "error", "field"}``; ``{"status", "body"}``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from shufflelab.ndp.plan import Plan

ARROW_STREAM = "application/vnd.apache.arrow.stream"


class NdpError(RuntimeError):
    """The proxy refused or failed a request: HTTP ``status``, its ``error`` and the ``field`` it names."""

    def __init__(self, status: int, error: str, field: str | None = None) -> None:
        super().__init__(f"HTTP {status}: {error}" + (f" (field {field})" if field else ""))
        self.status = status
        self.error = error
        self.field = field


@dataclass(frozen=True)
class PushdownStats:
    """What one pushdown cost at the storage node (the proxy's ``X-NDP-*`` headers)."""

    input_bytes: int
    output_bytes: int
    rows: int
    exec_s: float
    read_s: float
    queue_s: float
    datanode: str
    operators: tuple[str, ...]

    @classmethod
    def from_headers(cls, headers: Mapping[str, str]) -> PushdownStats:
        h = {k.lower(): v for k, v in headers.items()}

        def num(name: str, kind: type = int) -> Any:
            try:
                return kind(h.get(name.lower(), "0") or 0)
            except ValueError:
                raise NdpError(502, f"the proxy sent a bad {name} header: {h.get(name.lower())!r}") from None

        return cls(
            input_bytes=num("X-NDP-Input-Bytes"),
            output_bytes=num("X-NDP-Output-Bytes"),
            rows=num("X-NDP-Rows"),
            exec_s=num("X-NDP-Exec-Seconds", float),
            read_s=num("X-NDP-Read-Seconds", float),
            queue_s=num("X-NDP-Queue-Seconds", float),
            datanode=h.get("x-ndp-datanode", ""),
            operators=tuple(o for o in h.get("x-ndp-operators", "").split(",") if o),
        )


@dataclass(frozen=True)
class PushdownResult:
    table: pa.Table
    stats: PushdownStats


def request_body(
    plan: Plan | Mapping[str, Any], schema: Mapping[str, str], row_groups: Sequence[int] | None = None
) -> bytes:
    """The JSON body of a pushdown request."""
    doc: dict[str, Any] = {
        "plan": plan.model_dump(mode="json", exclude_none=True) if isinstance(plan, Plan) else dict(plan),
        "schema": dict(schema),
    }
    if row_groups is not None:
        doc["row_groups"] = list(row_groups)
    return json.dumps(doc, separators=(",", ":")).encode()


class Client:
    """One NDP proxy at ``url`` (``http://host:port``)."""

    def __init__(self, url: str, timeout_s: float = 120.0) -> None:
        u = urllib.parse.urlsplit(url)
        if u.scheme != "http" or not u.hostname or u.path not in ("", "/"):
            raise ValueError(f"{url!r} is not http://<address>:<port>")
        self.host = u.hostname
        self.port = u.port or 80
        self.timeout_s = timeout_s

    def send(
        self, method: str, target: str, body: bytes | None = None, headers: Mapping[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        """One raw exchange: (status, headers, body)."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)
        try:
            conn.request(method, target, body=body, headers=dict(headers or {}))
            r = conn.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            conn.close()

    def status(self) -> dict[str, Any]:
        """The proxy's load: ``queued``, ``running``, ``workers``, ``drain_per_s``, counters."""
        code, _, body = self.send("GET", "/ndp/v1/status")
        if code != 200:
            raise NdpError(code, body[:300].decode("utf-8", "replace"))
        doc: dict[str, Any] = json.loads(body)
        return doc

    def pushdown(
        self,
        path: str,
        plan: Plan | Mapping[str, Any],
        schema: Mapping[str, str],
        row_groups: Sequence[int] | None = None,
    ) -> PushdownResult:
        """Run ``plan`` on the Parquet file ``path`` (absolute HDFS path) at the proxy."""
        return self.pushdown_body(path, request_body(plan, schema, row_groups))

    def pushdown_body(self, path: str, body: bytes) -> PushdownResult:
        if not path.startswith("/"):
            raise ValueError(f"HDFS path {path!r} must be absolute")
        target = "/ndp/v1" + urllib.parse.quote(path, safe="/")
        code, headers, data = self.send("POST", target, body, {"Content-Type": "application/json"})
        if code != 200:
            raise _error(code, data)
        h = {k.lower(): v for k, v in headers.items()}
        if h.get("content-type", "").split(";")[0].strip() != ARROW_STREAM:
            raise NdpError(502, f"the proxy answered {h.get('content-type')!r}, not {ARROW_STREAM}")
        try:
            table = pa.ipc.open_stream(data).read_all()
        except pa.ArrowInvalid as exc:
            raise NdpError(502, f"the proxy's answer is not an Arrow IPC stream: {exc}") from None
        return PushdownResult(table, PushdownStats.from_headers(headers))


def _error(code: int, data: bytes) -> NdpError:
    try:
        doc = json.loads(data)
        return NdpError(code, str(doc.get("error")), doc.get("field"))
    except (ValueError, AttributeError):
        return NdpError(code, data[:300].decode("utf-8", "replace"))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m shufflelab.ndp.client", description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True, help="the proxy, http://IP:PORT")
    ap.add_argument("--timeout", type=float, default=120.0)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("status")
    pd = sub.add_parser("pushdown")
    pd.add_argument("path")
    pd.add_argument("--request", type=Path, required=True, help="JSON body {plan, schema[, row_groups]}")
    pd.add_argument("--out", type=Path, required=True, help="where the result goes (Arrow IPC stream)")
    sd = sub.add_parser("send")
    sd.add_argument("method")
    sd.add_argument("target", help="path and query, e.g. /ndp/v1/data/x.parquet")
    sd.add_argument("--body-file", type=Path, default=None)
    a = ap.parse_args(argv)
    c = Client(a.url, a.timeout)
    try:
        if a.cmd == "status":
            print(json.dumps(c.status()))
        elif a.cmd == "pushdown":
            try:
                res = c.pushdown_body(a.path, a.request.read_bytes())
            except NdpError as exc:
                print(json.dumps({"status": exc.status, "error": exc.error, "field": exc.field}))
                return 0
            with pa.OSFile(str(a.out), "wb") as f, pa.ipc.new_stream(f, res.table.schema) as w:
                w.write_table(res.table)
            print(json.dumps({"status": 200, "stats": asdict(res.stats)}))
        else:
            body = a.body_file.read_bytes() if a.body_file else None
            code, _, data = c.send(a.method, a.target, body)
            print(json.dumps({"status": code, "body": data[:2000].decode("utf-8", "replace")}))
    except (OSError, http.client.HTTPException) as exc:
        print(f"ndp client: {a.url}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
