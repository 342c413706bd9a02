"""The stand-in hosts' sweep (tests/hosts/conftest.py), its pure part: which namespaces and links of
earlier labs a new lab removes. A lab whose maker was killed before its clean-up (3 namespaces and
2 bridges left, its OpenSSH servers still running) goes; a lab whose maker still runs -- being made
or used by another test session -- stays, as does anything that is not a stand-in's."""

from __future__ import annotations

from hosts.conftest import stale_stand_ins

NAMESPACES = ["slssha1b2h1", "slssha1b2h2", "slssha1b2h3", "slsshc3d4h1", "sl0f0f0f-w1", "other"]
LINKS = ["lo", "eth0", "slsshba1b2", "slsshda1b2", "slssha1b2v1", "slsshbc3d4", "slsshdc3d4", "slsshx"]


def test_a_lab_whose_maker_is_gone_is_swept_with_its_servers_still_running() -> None:
    owners = {"a1b2": 111, "c3d4": 222}  # a1b2's test process was killed; c3d4's runs
    ns, links = stale_stand_ins(NAMESPACES, LINKS, owners, alive=lambda pid: pid == 222, busy=lambda ns: True)
    assert ns == ["slssha1b2h1", "slssha1b2h2", "slssha1b2h3"]
    assert links == ["slssha1b2v1", "slsshba1b2", "slsshda1b2"]


def test_without_a_recorded_maker_only_a_lab_with_nothing_left_running_is_swept() -> None:
    # labs made before makers were recorded: c3d4's servers still run, a1b2's are gone
    ns, links = stale_stand_ins(
        NAMESPACES, LINKS, {}, alive=lambda pid: True, busy=lambda ns: ns.startswith("slsshc3d4")
    )
    assert ns == ["slssha1b2h1", "slssha1b2h2", "slssha1b2h3"] and "slsshbc3d4" not in links
    # bridges left without a namespace (the lab was cut short between the two) go too
    assert stale_stand_ins([], ["slsshb0e0f", "slsshd0e0f"], {}, lambda pid: True, lambda ns: True) == (
        [],
        ["slsshb0e0f", "slsshd0e0f"],
    )


def test_a_lab_being_made_by_a_live_test_process_stays() -> None:
    # its bridges exist, its first namespace not yet: nothing runs in it, but its maker does
    assert stale_stand_ins([], ["slsshb9f9f", "slsshd9f9f"], {"9f9f": 333}, lambda pid: True, lambda ns: False) == (
        [],
        [],
    )
