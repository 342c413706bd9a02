"""How a link's rate and queue limit become ``tc`` (HTB + bfifo/pfifo) and userspace-switch
parameters, and the limits of those commands.

The fabric builds its commands with these functions (``netplan.py``'s ``shaping_commands``,
``switch/config.py``'s port config, ``emulate/traffic.py``'s iperf3 rate), and spec validation
checks a link with :func:`rate_problem` and :func:`queue_problem`, which repeat what ``tc`` does
with those numbers (iproute2 6.1: ``get_rate64``, ``tc_calc_xmittime``, ``get_size``). So a spec
that validates is one the fabric can apply, and one it cannot is refused at load with the reason.

Pure: no I/O.
"""

from __future__ import annotations

FRAME_BYTES = 1514
"""The largest Ethernet frame without offloads (MTU 1500 + 14 bytes of header), as HTB counts it."""

U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1

PSCHED_TICKS_PER_US = 1000 / 64
"""``tc``'s ``tick_in_usec``: HTB's burst is passed to the kernel in psched ticks of 64 ns (the
kernel's ``PSCHED_SHIFT`` = 6; ``/proc/net/psched`` reads ``000003e8 00000040 000f4240 ...``),
in a 32-bit field (``tc_htb_opt.buffer``)."""


def rate_bits(rate_mbps: float) -> int:
    """The rate handed to ``tc`` (``rate <N>bit``) and to the switch (``rate_bps``), in bit/s."""
    return int(rate_mbps * 1e6)


def rate_bytes(rate_mbps: float) -> int:
    """The rate HTB and the switch shape to, in whole bytes/s: ``tc`` divides the bit rate by 8 and
    truncates (``get_rate64``), the switch does ``rate_bps / 8``. 0 is refused by ``tc`` ("rate is
    required") and means *unlimited* to the switch."""
    return rate_bits(rate_mbps) // 8


def htb_quantum_bytes(rate_mbps: float, mtu: int = FRAME_BYTES) -> int:
    """HTB DRR quantum in bytes: one millisecond of the rate, clamped to [MTU, 200 000].

    Every shaped port has a single class, so the quantum only needs to be sane (HTB warns when
    its default rate/r2q is huge at Gbit rates).
    """
    return max(mtu, min(200_000, int(rate_mbps * 1e6 / 8 / 1000)))


def htb_burst_bytes(rate_mbps: float, mtu: int = FRAME_BYTES) -> int:
    """HTB burst in bytes: one millisecond of the rate, at least two MTUs.

    HTB's default burst is too small above a few hundred Mbit/s (timer granularity caps the
    achieved rate); a 1 ms bucket keeps goodput at the configured rate without hiding queues.
    """
    return max(2 * mtu, int(rate_mbps * 1e6 / 8 / 1000))


def htb_buffer_ticks(rate_mbps: float) -> int:
    """The burst as ``tc`` passes it to HTB: its transmission time at the rate, in psched ticks
    (``tc_calc_xmittime``), before ``tc`` stores it in a 32-bit field. Needs ``rate_bytes >= 1``."""
    micros = int(1e6 * (htb_burst_bytes(rate_mbps) / rate_bytes(rate_mbps)))  # TIME_UNITS_PER_SEC * size / rate
    return int(micros * PSCHED_TICKS_PER_US)


def _min_rate_mbps() -> float:
    r = 1
    while True:
        mbps = r * 8 / 1e6
        if rate_bytes(mbps) >= 1 and htb_buffer_ticks(mbps) <= U32_MAX:
            return mbps
        r += 1


MIN_RATE_MBPS = _min_rate_mbps()
"""The lowest rate both datapaths can shape (96 bit/s): below it HTB's two-frame burst lasts longer
than its 32-bit tick count holds (about 275 s), and below 8 bit/s ``tc`` sees 0 bytes/s."""


def rate_problem(rate_mbps: float) -> str | None:
    """Why ``tc``/HTB or the switch cannot shape a link at ``rate_mbps`` (``None``: they can)."""
    if rate_bytes(rate_mbps) < 1:
        return (
            f"{rate_mbps:g} Mbit/s is {rate_bits(rate_mbps)} bit/s, 0 whole bytes/s: tc refuses it (HTB shapes "
            f"whole bytes/s) and the userspace switch would take it as unlimited; the lowest rate is "
            f"{MIN_RATE_MBPS:g} Mbit/s"
        )
    if htb_buffer_ticks(rate_mbps) > U32_MAX:
        return (
            f"{rate_mbps:g} Mbit/s is too slow for HTB: its burst of {htb_burst_bytes(rate_mbps)} bytes would "
            f"take longer than HTB's 32-bit burst time holds (about {U32_MAX / PSCHED_TICKS_PER_US / 1e6:.0f} s); "
            f"the lowest rate is {MIN_RATE_MBPS:g} Mbit/s"
        )
    if htb_burst_bytes(rate_mbps) > U32_MAX or htb_quantum_bytes(rate_mbps) > U32_MAX:
        return f"{rate_mbps:g} Mbit/s needs an HTB burst beyond tc's 32-bit sizes"
    return None


def queue_problem(queue_bytes: int | None, queue_packets: int | None) -> str | None:
    """Why bfifo/pfifo (``tc``'s 32-bit ``limit``) or the switch cannot hold this queue limit."""
    if queue_bytes is not None:
        if queue_bytes < FRAME_BYTES:
            return (
                f"queue_bytes = {queue_bytes} is smaller than one full-size frame ({FRAME_BYTES} bytes): "
                "the FIFO would drop every full-size packet"
            )
        if queue_bytes > U32_MAX:
            return f"queue_bytes = {queue_bytes} exceeds tc's 32-bit bfifo limit ({U32_MAX})"
    if queue_packets is not None and not 1 <= queue_packets <= U32_MAX:
        return f"queue_packets = {queue_packets} is outside tc's pfifo limit (1 to {U32_MAX})"
    return None


# a full TCP segment's payload share of its Ethernet frame (1448 of 1514 bytes, timestamps on): what
# a perfect link delivers to TCP as goodput, per bit of its rate
TCP_PAYLOAD_SHARE = 1448 / 1514
UDP_PAYLOAD_BYTES = 1400
UDP_OVERHEAD_BYTES = 14 + 20 + 8  # Ethernet + IPv4 + UDP headers, as counted by the qdisc


def udp_payload_rate_bps(rate_mbps: float, percent: float) -> int:
    """iperf3 ``-b`` (payload bit/s) so that the wire rate is ``percent`` % of ``rate_mbps``.
    iperf3 takes ``-b 0`` as *unlimited*: a positive share must give at least 1 bit/s."""
    wire = rate_mbps * 1e6 * percent / 100.0
    return int(wire * UDP_PAYLOAD_BYTES / (UDP_PAYLOAD_BYTES + UDP_OVERHEAD_BYTES))
