"""Spec fragments the simulator tests share (TOML text, pasted into each test's spec)."""

# Two leaves of four hosts under one spine: 1 Gbit/s host links, 2 Gbit/s uplinks.
LEAF_SPINE_2X4 = """
[topology]
kind = "leaf_spine"
leaves = 2
hosts_per_leaf = 4
spines = 1
host_gbps = 1
uplink_gbps = 2
"""
