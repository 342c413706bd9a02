"""Event logs on HDFS, read through WebHDFS (the NameNode's REST interface, on by default in every
HDFS): a path with the methods :func:`shufflelab.eventlog.files.discover` uses on a
:class:`pathlib.Path` (``name``, ``iterdir``, ``is_dir``, ``stat``, ``open``...), so logs on HDFS are
found and named by the same rules as local ones, and each file is streamed, never held whole.

``hdfs://host[:port]/path`` is read through WebHDFS on the NameNode's default HTTP port (9870);
``webhdfs://host:port/path`` (Hadoop's own scheme for WebHDFS) names that port. The user is
``HADOOP_USER_NAME`` or this process's (simple authentication; Kerberos is not supported).
"""

from __future__ import annotations

import getpass
import http.client
import json
import os
import posixpath
import urllib.parse
from dataclasses import dataclass
from typing import IO, Any

SCHEMES = ("hdfs", "webhdfs")
WEBHDFS_PORT = 9870  # dfs.namenode.http-address's default port since Hadoop 3
TIMEOUT_S = 60.0
MAX_REDIRECTS = 3


class RemoteLogError(OSError):
    """HDFS could not be reached or answered an error; the message names the URL."""


def is_remote(location: str) -> bool:
    return urllib.parse.urlsplit(location).scheme in SCHEMES


@dataclass(frozen=True)
class Stat:
    st_size: int
    st_mtime: float  # seconds since the epoch
    is_dir: bool


def _user() -> str:
    try:
        return os.environ.get("HADOOP_USER_NAME") or getpass.getuser()
    except (KeyError, OSError):
        return "root"


class RemotePath:
    """A file or folder on HDFS. ``url`` is as given (it names the path in every message)."""

    def __init__(self, url: str, _stat: Stat | None = None) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in SCHEMES:
            raise ValueError(f"{url}: not an hdfs:// or webhdfs:// URL")
        if not parts.hostname:
            raise ValueError(f"{url}: no NameNode host in the URL")
        try:
            port = parts.port
        except ValueError:
            raise ValueError(f"{url}: the port is not a number") from None
        self.url = url.rstrip("/") if parts.path not in ("", "/") else url
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.http_port = port if parts.scheme == "webhdfs" and port else WEBHDFS_PORT
        self.netloc = parts.netloc
        self.path = posixpath.normpath(parts.path or "/")
        self._stat = _stat

    # -- what pathlib.Path offers and files.discover uses ----------------------------------------
    def __str__(self) -> str:
        return self.url

    def __repr__(self) -> str:
        return f"RemotePath({self.url!r})"

    def __lt__(self, other: RemotePath) -> bool:
        return self.path < other.path

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RemotePath) and self.url == other.url

    def __hash__(self) -> int:
        return hash(self.url)

    @property
    def name(self) -> str:
        return posixpath.basename(self.path)

    @property
    def suffix(self) -> str:
        name = self.name
        i = name.rfind(".")
        return name[i:] if 0 < i < len(name) - 1 else ""

    def child(self, name: str, stat: Stat | None = None) -> RemotePath:
        return RemotePath(f"{self.scheme}://{self.netloc}{posixpath.join(self.path, name)}", stat)

    def stat(self) -> Stat:
        if self._stat is None:
            doc = self._json("GETFILESTATUS")
            self._stat = _stat_of(doc["FileStatus"])
        return self._stat

    def exists(self) -> bool:
        try:
            self.stat()
        except FileNotFoundError:
            return False
        return True

    def is_dir(self) -> bool:
        return self.exists() and self.stat().is_dir

    def is_file(self) -> bool:
        return self.exists() and not self.stat().is_dir

    def iterdir(self) -> list[RemotePath]:
        """The folder's entries, each with its status (one request for the folder)."""
        doc = self._json("LISTSTATUS")
        out = []
        for st in (doc.get("FileStatuses") or {}).get("FileStatus") or []:
            name = str(st.get("pathSuffix") or "")
            if name:
                out.append(self.child(name, _stat_of(st)))
        return out

    def open(self, mode: str = "rb") -> IO[bytes]:
        """The file's bytes as a stream (WebHDFS ``OPEN``, following the NameNode's redirect to a DataNode)."""
        if mode != "rb":
            raise ValueError(f"{self.url}: opened for reading only")
        res = self._request("OPEN")
        return res  # type: ignore[return-value]  # an HTTPResponse: read(n), close, a context manager

    # -- WebHDFS -----------------------------------------------------------------------------------
    def _query(self, op: str) -> str:
        return urllib.parse.quote(self.path) + "?" + urllib.parse.urlencode({"op": op, "user.name": _user()})

    def _request(self, op: str) -> http.client.HTTPResponse:
        host, port, target = self.host, self.http_port, f"/webhdfs/v1{self._query(op)}"
        for _ in range(MAX_REDIRECTS + 1):
            conn = http.client.HTTPConnection(host, port, timeout=TIMEOUT_S)
            try:
                conn.request("GET", target)
                res = conn.getresponse()
            except OSError as exc:
                conn.close()
                raise RemoteLogError(
                    f"{self.url}: cannot reach WebHDFS at {host}:{port} ({exc.strerror or exc})"
                ) from None
            if res.status in (301, 302, 303, 307, 308):
                loc = urllib.parse.urlsplit(res.getheader("Location") or "")
                res.read()
                conn.close()
                if not loc.hostname:
                    raise RemoteLogError(f"{self.url}: WebHDFS redirected to nowhere")
                host, port = loc.hostname, loc.port or 80
                target = loc.path + ("?" + loc.query if loc.query else "")
                continue
            if res.status == 200:
                return res
            body = res.read(4096)
            conn.close()
            message = _remote_exception(body)
            if res.status == 404:
                raise FileNotFoundError(f"{self.url}: no such file or directory")
            raise RemoteLogError(
                f"{self.url}: WebHDFS {op} answered HTTP {res.status}" + (f": {message}" if message else "")
            )
        raise RemoteLogError(f"{self.url}: WebHDFS redirected more than {MAX_REDIRECTS} times")

    def _json(self, op: str) -> dict[str, Any]:
        with self._request(op) as res:
            try:
                doc = json.loads(res.read())
            except (ValueError, OSError) as exc:
                raise RemoteLogError(f"{self.url}: WebHDFS {op} answered something that is not JSON ({exc})") from None
        if not isinstance(doc, dict):
            raise RemoteLogError(f"{self.url}: WebHDFS {op} answered {str(doc)[:100]}")
        return doc


def _stat_of(st: dict[str, Any]) -> Stat:
    return Stat(
        int(st.get("length") or 0), float(st.get("modificationTime") or 0) / 1000.0, st.get("type") == "DIRECTORY"
    )


def _remote_exception(body: bytes) -> str:
    """The message of WebHDFS's ``RemoteException`` answer (empty when there is none)."""
    try:
        doc = json.loads(body)
        return str(doc["RemoteException"].get("message") or "")
    except (ValueError, KeyError, TypeError, AttributeError):
        return ""
