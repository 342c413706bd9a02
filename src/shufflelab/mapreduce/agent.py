"""The per-host transfer agent: ``python -m shufflelab.mapreduce.agent PLAN.json NODE OUT.json``.

One agent runs in every host's namespace. It serves the outputs of the maps placed on its host
(a fetch for a map that has not finished yet waits until the map's traced end) and runs the
reducers placed on its host: from the slow-start instant on, each reducer fetches its partition
of every finished map, at most ``parallel_copies`` fetches at a time, one TCP connection per
fetch, then sleeps its reduce time. Every fetch is recorded (request sent, first byte, last byte)
so flow completion times come from the hosts themselves. All agents share the job's start
instant ``t0`` (epoch seconds), so map completion times are known to every reducer without a
coordinator on the wire -- like Hadoop's map-completion events, minus their polling delay.

``t0`` is the plan's, or, when the plan's is null, the controller's once every agent listens: the
agent then writes ``OUT.listening`` as soon as it listens and waits for ``start.json`` (``{"t0":
...}``) beside the plan -- so a job starts as soon as its agents are ready, however long their
interpreters took to start, instead of at a guessed instant.

The agent exits when its reducers are done and every fetch of its maps has been served (or at the
plan's deadline), writing its result as JSON atomically.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import signal
import struct
import sys
import time
from pathlib import Path
from typing import Any

from shufflelab.mapreduce.trace import Trace

REQUEST = struct.Struct("!II")  # map index, reduce index
LENGTH = struct.Struct("!Q")
CHUNK = 256 * 1024
_ZEROS = memoryview(bytes(CHUNK))


class Agent:
    def __init__(
        self, plan: dict[str, Any], node: str, *, listening: Path | None = None, start: Path | None = None
    ) -> None:
        self.plan = plan
        self.node = node
        self.trace = Trace.model_validate(plan["trace"])
        self.timeout_s = float(plan.get("timeout_s", 600))
        if plan.get("t0") is None and (listening is None or start is None):
            raise ValueError("a plan without t0 needs the listening and start files")
        self.listening, self.start = listening, start
        self.t0: float = float(plan["t0"]) if plan.get("t0") is not None else math.nan
        self.deadline = self.t0 + self.timeout_s
        self.addr = {n: (a[0], int(a[1])) for n, a in plan["nodes"].items()}
        if node not in self.addr:
            raise ValueError(f"node {node!r} is not in the plan's nodes: {', '.join(self.addr)}")
        self.map_node: list[str] = plan["map_node"]
        self.reduce_node: list[str] = plan["reduce_node"]
        self.my_maps = [i for i, n in enumerate(self.map_node) if n == node]
        self.my_reduces = [j for j, n in enumerate(self.reduce_node) if n == node]
        self.to_serve = len(self.my_maps) * len(self.trace.reduces)
        self.served = 0
        self.served_bytes = 0
        self.fetches: list[dict[str, Any]] = []
        self.reducers: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.all_served = asyncio.Event()
        self.started = asyncio.Event()  # t0 is known
        self.t_listening: float | None = None
        self.t_ready: float | None = None  # when it listened and knew t0

    # -- serving map outputs -------------------------------------------------------------------
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            m, r = REQUEST.unpack(await reader.readexactly(REQUEST.size))
            if m >= len(self.map_node) or self.map_node[m] != self.node or r >= len(self.trace.reduces):
                self.errors.append(f"bad request map {m} reduce {r}")
                return
            await self.started.wait()  # a peer may know t0 a moment before this agent does
            await _sleep_until(self.t0 + self.trace.map_end_s(m))
            n = self.trace.maps[m].output_bytes[r]
            writer.write(LENGTH.pack(n))
            left = n
            while left > 0:
                k = min(left, CHUNK)
                writer.write(_ZEROS[:k])
                left -= k
                await writer.drain()
            # drain() only brings asyncio's buffer below its low-water mark: close and wait until the
            # transport has handed every byte to the kernel before counting the partition as served
            # (an agent that exits with bytes still in asyncio's buffer would truncate the fetch)
            writer.close()
            await writer.wait_closed()
            self.served += 1
            self.served_bytes += n
            if self.served >= self.to_serve:
                self.all_served.set()
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            self.errors.append(f"serving: {type(exc).__name__}: {exc}")
        finally:
            writer.close()

    # -- reducers ------------------------------------------------------------------------------
    async def _fetch(self, m: int, r: int, sem: asyncio.Semaphore) -> None:
        async with sem:
            src = self.map_node[m]
            host, port = self.addr[src]
            rec: dict[str, Any] = {"map": m, "reduce": r, "src": src, "dst": self.node, "bytes": 0}
            rec["t_request"] = time.time()
            for attempt in range(50):
                try:
                    reader, writer = await asyncio.open_connection(host, port)
                    break
                except ConnectionRefusedError:  # the peer's agent is still starting
                    if time.time() > self.deadline or attempt == 49:
                        raise
                    await asyncio.sleep(0.1)
            try:
                rec["t_connected"] = time.time()
                writer.write(REQUEST.pack(m, r))
                await writer.drain()
                (n,) = LENGTH.unpack(await reader.readexactly(LENGTH.size))
                rec["t_first_byte"] = time.time()
                got = 0
                while got < n:
                    data = await reader.read(min(1 << 20, n - got))
                    if not data:
                        raise ConnectionError(f"map {m} -> reduce {r}: connection closed after {got} of {n} bytes")
                    got += len(data)
                rec["bytes"] = got
                rec["t_end"] = time.time()
            finally:
                writer.close()
            self.fetches.append(rec)

    async def _reducer(self, r: int) -> None:
        tr = self.trace
        start = self.t0 + tr.slowstart_s()
        await _sleep_until(start)
        row: dict[str, Any] = {"reduce": r, "node": self.node, "t_start": time.time()}
        sem = asyncio.Semaphore(tr.parallel_copies)
        order = sorted(range(len(tr.maps)), key=tr.map_end_s)
        tasks = []
        for m in order:
            await _sleep_until(self.t0 + tr.map_end_s(m))  # map-completion event
            tasks.append(asyncio.create_task(self._fetch(m, r, sem)))
        try:
            for t in asyncio.as_completed(tasks):
                await t
        except BaseException:
            for t in tasks:  # one failed fetch fails the reducer: stop its other copies too
                t.cancel()
            raise
        row["t_shuffle_end"] = time.time()
        await asyncio.sleep(tr.reduces[r].duration_s)
        row["t_end"] = time.time()
        self.reducers.append(row)

    async def run(self) -> dict[str, Any]:
        host, port = self.addr[self.node]
        server = await asyncio.start_server(self._serve, host, port, reuse_address=True)
        self.t_listening = time.time()  # fetches of its maps' outputs may come from now on
        if self.to_serve == 0:
            self.all_served.set()
        ok = True
        try:
            if math.isnan(self.t0):
                await self._await_start()
            self.t_ready = time.time()
            self.started.set()
            remaining = max(0.1, self.deadline - time.time())
            await asyncio.wait_for(
                asyncio.gather(*(self._reducer(r) for r in self.my_reduces), self.all_served.wait()),
                timeout=remaining,
            )
        except TimeoutError:
            ok = False
            self.errors.append(f"deadline: served {self.served}/{self.to_serve}, reducers done {len(self.reducers)}")
        except Exception as exc:  # noqa: BLE001 - reported in the result, the runner decides
            ok = False
            self.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            server.close()
        return {
            "node": self.node,
            "ok": ok and not self.errors,
            "t0": None if math.isnan(self.t0) else self.t0,
            "t_listening": self.t_listening,
            "t_ready": self.t_ready,
            "maps": self.my_maps,
            "served": self.served,
            "served_bytes": self.served_bytes,
            "fetches": self.fetches,
            "reducers": self.reducers,
            "errors": self.errors[:20],
        }

    async def _await_start(self) -> None:
        """Say that this agent listens (``listening``), then wait for the controller's ``t0`` in
        ``start`` (read again while it is incomplete: a copy may still be arriving)."""
        assert self.listening is not None and self.start is not None
        write_json(self.listening, {"node": self.node, "t_listening": self.t_listening})
        give_up = time.time() + self.timeout_s
        while True:
            try:
                self.t0 = float(json.loads(self.start.read_text())["t0"])
                break
            except (OSError, ValueError, KeyError, TypeError):
                if time.time() > give_up:
                    raise RuntimeError(f"no start instant in {self.start} within {self.timeout_s:.0f} s") from None
                await asyncio.sleep(0.01)
        self.deadline = self.t0 + self.timeout_s


async def _sleep_until(t: float) -> None:
    d = t - time.time()
    if d > 0:
        await asyncio.sleep(d)


START = "start.json"  # beside the plan: the controller's t0 for a plan without one


def listening_path(out: Path) -> Path:
    """The file an agent writing its result to ``out`` writes once it listens."""
    return out.with_suffix(".listening")


def write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        print("usage: python -m shufflelab.mapreduce.agent PLAN.json NODE OUT.json", file=sys.stderr)
        return 2
    plan_path, out = Path(args[0]), Path(args[2])
    plan = json.loads(plan_path.read_text())
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    agent = Agent(plan, args[1], listening=listening_path(out), start=plan_path.with_name(START))
    try:
        result = asyncio.run(agent.run())
    except KeyboardInterrupt:
        result = {"node": args[1], "ok": False, "errors": ["stopped"], "fetches": agent.fetches,
                  "reducers": agent.reducers, "t0": None if math.isnan(agent.t0) else agent.t0,
                  "t_listening": agent.t_listening, "t_ready": agent.t_ready, "served": agent.served}  # fmt: skip
    write_json(out, result)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
