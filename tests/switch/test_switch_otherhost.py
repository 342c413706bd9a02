"""Root: the userspace switch forwards only frames addressed to its own port's MAC. A frame that
reaches its port addressed to another machine's MAC (PACKET_OTHERHOST: on machines, a rack's own
frame the data network floods to the router host) is not the switch's to forward -- forwarded, it
would cross the link between the racks a second time and arrive twice. Here h1 sends raw UDP
frames to h2's address through the switch on a 2-host star: the ones addressed to another MAC must
not reach h2, the same frames addressed to the switch's port must (all of them)."""

from __future__ import annotations

import json
import struct
import sys
import time
from collections.abc import Iterator

import pytest
from benchmarks.switchlab import Star, build_star

from shufflelab.emulate import netns
from shufflelab.emulate.fabric import interface_mac, namespace_switch
from shufflelab.switch import Switch, SwitchConfig, SwitchPort, binary_path

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(binary_path() is None, reason="shufflelab-switch is not built (make setup)"),
]

PORT, FRAMES = 5999, 20
ANOTHER_MAC = "02:00:5e:00:00:99"  # no interface here has it

# h2: count the datagrams of each tag until the END one (or 15 s), then print the counts
RECEIVER = """
import json, socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
s.settimeout(15)
print("listening", flush=True)
got = {}
try:
    while True:
        tag = s.recv(2048)[:5].decode()
        got[tag] = got.get(tag, 0) + 1
        if tag == "END__":
            break
except OSError:
    pass
print(json.dumps(got), flush=True)
"""

# h1: raw Ethernet frames out of eth0 -- argv: frames as hex, one per argument
SENDER = """
import socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("eth0", 0))
for frame in sys.argv[1:]:
    s.send(bytes.fromhex(frame))
"""


def _mac(text: str) -> bytes:
    return bytes.fromhex(text.replace(":", ""))


def _checksum(header: bytes) -> int:
    total = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def udp_frame(dst_mac: str, src_mac: str, src_ip: str, dst_ip: str, payload: bytes) -> bytes:
    """An Ethernet frame carrying one IPv4 UDP datagram to ``PORT`` (UDP checksum 0: none)."""
    udp = struct.pack("!HHHH", 40000, PORT, 8 + len(payload), 0) + payload
    addrs = bytes(map(int, src_ip.split("."))) + bytes(map(int, dst_ip.split(".")))
    ip = struct.pack("!BBHHHBBH", 0x45, 0, 20 + len(udp), 1, 0x4000, 64, 17, 0) + addrs
    ip = ip[:10] + struct.pack("!H", _checksum(ip)) + ip[12:]
    return _mac(dst_mac) + _mac(src_mac) + b"\x08\x00" + ip + udp


@pytest.fixture
def star() -> Iterator[Star]:
    with netns.lease() as lz:
        yield build_star(lz, 2)
    assert not [n for n in netns.namespaces() if n.startswith(lz.prefix)]


def test_frames_addressed_to_another_machine_are_not_forwarded(star: Star) -> None:
    cfg = SwitchConfig(
        ports=[SwitchPort(h, rate_mbps=100, queue_bytes=200_000) for h in star.hosts], hosts=star.switch_hosts()
    )
    sw = namespace_switch(star.lease, "r", cfg, switches=Switch)
    sw.start()
    log = star.lease.scratch / "receiver.log"
    argv = [sys.executable, "-c", RECEIVER, star.addresses["h2"], str(PORT)]
    receiver: netns.NamespaceProcess | None = None
    try:
        receiver = netns.NamespaceProcess(star.ns("h2"), argv, log)
        deadline = time.monotonic() + 15
        while "listening" not in (log.read_text() if log.exists() else "") and time.monotonic() < deadline:
            time.sleep(0.05)
        port_mac = interface_mac(star.router_ns, "h1", netns.run_at)  # the switch's port towards h1
        src, dst = star.addresses["h1"], star.addresses["h2"]

        def frames(to: str, tag: str, n: int) -> list[str]:
            return [udp_frame(to, star.macs["h1"], src, dst, tag.encode() + b"-" * 60).hex() for _ in range(n)]

        # the other machine's frames first: had they been forwarded, they would arrive before END
        netns.run([sys.executable, "-c", SENDER, *frames(ANOTHER_MAC, "OTHER", FRAMES)], ns=star.ns("h1"))
        netns.run([sys.executable, "-c", SENDER, *frames(port_mac, "OURS_", FRAMES)], ns=star.ns("h1"))
        time.sleep(0.2)
        netns.run([sys.executable, "-c", SENDER, *frames(port_mac, "END__", 1)], ns=star.ns("h1"))
        deadline = time.monotonic() + 20
        while receiver.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        if receiver is not None:
            receiver.stop(grace_s=1)
        sw.stop()
    got = json.loads(log.read_text().splitlines()[-1])
    assert got.get("END__") == 1, got  # the switch forwarded what was addressed to it
    assert got.get("OURS_") == FRAMES, got
    assert "OTHER" not in got, got  # and nothing addressed to another machine


def test_the_frames_are_well_formed() -> None:
    """The frame the root test sends: Ethernet, then an IPv4 header whose checksum verifies."""
    f = udp_frame("02:00:00:00:00:01", "02:00:00:00:00:02", "10.77.1.1", "10.77.2.1", b"OURS_")
    assert f[:6] == bytes.fromhex("020000000001") and f[12:14] == b"\x08\x00"
    assert _checksum(f[14:34]) == 0 and f[14 + 9] == 17 and f[-5:] == b"OURS_"
