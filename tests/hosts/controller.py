"""A controller process for the kill tests: leases one stand-in host, changes two sysctls and the
data interface's root qdisc over SSH, says so on stdout, then waits to be signalled.

    python controller.py INVENTORY HOST"""

from __future__ import annotations

import asyncio
import sys

from shufflelab.hosts import inventory, lease
from shufflelab.hosts.control import connect


async def main(inv_path: str, host: str) -> None:
    inv = inventory.load(inv_path)
    async with connect(inv, [host]) as sessions, lease.leased(sessions, inv.ssh.lease_dir) as leases:
        hl = leases[host]
        await hl.set_sysctl("net.ipv4.tcp_ecn", "1")
        print("changed sysctl", flush=True)
        await hl.set_sysctl("net.ipv4.tcp_slow_start_after_idle", "0")
        await hl.replace_root_qdisc("data0", ["handle", "1:", "htb", "default", "1"])
        await hl.tc(
            "data0", ["class", "add", "dev", "data0", "parent", "1:", "classid", "1:1", "htb", "rate", "10mbit"]
        )
        await hl.start("start a daemon", ["tail", "-f", "/dev/null"])
        print(f"changed all {hl.lease_id}", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    try:
        lease.run_controller(main(sys.argv[1], sys.argv[2]))
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("restored", flush=True)
        sys.exit(130)
