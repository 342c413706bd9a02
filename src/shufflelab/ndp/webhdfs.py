"""WebHDFS: the answers it gives (block locations, the NameNode's live DataNodes) parsed, and one
HTTP exchange with it (:func:`exchange`, run by the cluster inside a client host's namespace via
``python -m shufflelab.ndp.hdfs --http``), which follows redirects only to the cluster's own
addresses.
"""

from __future__ import annotations

import http.client
import json
import os
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shufflelab.ndp.hdfs_config import HdfsError


@dataclass(frozen=True)
class BlockLocation:
    """One block of a file: its byte range and the DataNodes holding a replica."""

    offset: int
    length: int
    hosts: tuple[str, ...]  # fabric host names (an address outside the cluster is kept as is)
    addresses: tuple[str, ...]  # the DataNodes' transfer addresses, ip:port


def parse_block_locations(doc: Mapping[str, Any], by_ip: Mapping[str, str]) -> list[BlockLocation]:
    """Blocks from a WebHDFS ``GETFILEBLOCKLOCATIONS`` answer (or ``GET_BLOCK_LOCATIONS``'s
    ``LocatedBlocks``), DataNode addresses mapped to host names with ``by_ip``."""
    out: list[BlockLocation] = []
    if "BlockLocations" in doc:
        for b in (doc["BlockLocations"] or {}).get("BlockLocation", []) or []:
            names = tuple(b.get("names") or [])
            ips = [n.rsplit(":", 1)[0] for n in names] or list(b.get("hosts") or [])
            out.append(BlockLocation(int(b["offset"]), int(b["length"]), tuple(by_ip.get(i, i) for i in ips), names))
    elif "LocatedBlocks" in doc:
        for b in (doc["LocatedBlocks"] or {}).get("locatedBlocks", []) or []:
            locs = b.get("locations") or []
            names = tuple(f"{loc['ipAddr']}:{loc['xferPort']}" for loc in locs)
            hosts = tuple(by_ip.get(loc["ipAddr"], loc["ipAddr"]) for loc in locs)
            out.append(BlockLocation(int(b["startOffset"]), int(b["block"]["numBytes"]), hosts, names))
    else:
        raise HdfsError(f"unexpected block-location answer: {json.dumps(doc)[:300]}")
    return sorted(out, key=lambda b: b.offset)


def live_datanodes(jmx: Mapping[str, Any]) -> dict[str, int]:
    """DataNode address -> remaining bytes, from the NameNode's ``NameNodeInfo`` JMX bean."""
    beans = jmx.get("beans") or []
    if not beans:
        return {}
    raw = beans[0].get("LiveNodes") or "{}"
    nodes = json.loads(raw) if isinstance(raw, str) else raw
    out: dict[str, int] = {}
    for info in nodes.values():
        addr = str(info.get("xferaddr", "")).rsplit(":", 1)[0]
        if addr:
            out[addr] = int(info.get("remaining", 0) or 0)
    return out


# -- the HTTP helper (runs inside a namespace) ------------------------------------------------------
def exchange(req: Mapping[str, Any]) -> dict[str, Any]:
    """One WebHDFS exchange: ``method`` on ``url`` with an optional file ``upload`` as the body,
    following up to 3 redirects to ``allow``-ed addresses only (307 keeps the method and body);
    the answer body goes to ``download`` (a path) or, as text, into the result.

    An upload follows WebHDFS's two steps: the first request carries no data (the NameNode answers
    with a redirect to a DataNode without reading a body, and closes: a body sent to it races that
    close and can fail with a broken pipe), the data goes to where it redirects."""
    method = str(req["method"])
    url = str(req["url"])
    allow = set(req.get("allow") or [])
    timeout = float(req.get("timeout", 60))
    upload = req.get("upload")
    download = req.get("download")
    redirected = False
    for _ in range(4):
        u = urllib.parse.urlsplit(url)
        host = u.hostname or ""
        if u.scheme != "http" or host not in allow:
            return {"error": f"refusing to contact {u.scheme}://{host} (not a cluster address)", "url": url}
        conn = http.client.HTTPConnection(host, u.port or 80, timeout=timeout)
        try:
            path = u.path + (f"?{u.query}" if u.query else "")
            headers = {"Connection": "close"}
            if upload is not None and method in ("PUT", "POST") and redirected:
                size = os.path.getsize(upload)
                headers["Content-Length"] = str(size)
                headers["Content-Type"] = "application/octet-stream"
                conn.putrequest(method, path)
                for k, v in headers.items():
                    conn.putheader(k, v)
                conn.endheaders()
                with open(upload, "rb") as f:
                    while chunk := f.read(1 << 20):
                        conn.send(chunk)
            else:
                empty = method == "PUT" or (upload is not None and method == "POST")
                conn.request(method, path, headers={**headers, "Content-Length": "0"} if empty else headers)
            resp = conn.getresponse()
            if resp.status in (301, 302, 303, 307) and resp.getheader("Location"):
                resp.read()
                url = urllib.parse.urljoin(url, resp.getheader("Location") or "")
                redirected = True
                if resp.status == 303:
                    method, upload = "GET", None
                continue
            if upload is not None and not redirected and 200 <= resp.status < 300:
                resp.read()
                return {"error": f"{method} {url}: answered {resp.status} without redirecting the data to a "
                                 "DataNode: nothing was uploaded", "url": url}  # fmt: skip
            if download is not None and resp.status == 200:
                n = 0
                with open(download, "wb") as f:
                    while chunk := resp.read(1 << 20):
                        f.write(chunk)
                        n += len(chunk)
                return {"status": resp.status, "bytes": n, "url": url}
            return {"status": resp.status, "body": resp.read().decode("utf-8", "replace"), "url": url}
        except OSError as exc:
            return {"error": f"{method} {url}: {exc}", "url": url}
        finally:
            conn.close()
    return {"error": f"too many redirects (last {url})", "url": url}
