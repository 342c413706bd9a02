"""The report's line on what the userspace switch emulated, over scenarios that differ."""

from __future__ import annotations

from shufflelab.report.text import _union_of_notes


def test_notes_on_hosts_merge_across_scenarios_and_others_appear_once() -> None:
    ecn = ["switch: 100 Mbit/s", "dctcp = DCTCP in the switch on hosts m1, m2, tgen"]
    legacy = ["switch: 100 Mbit/s", "dctcp = DCTCP in the switch on hosts tgen", "vcc: legacy hosts: m1, m2"]
    assert _union_of_notes([ecn, legacy]) == [
        "switch: 100 Mbit/s",
        "dctcp = DCTCP in the switch on hosts m1, m2, tgen",
        "vcc: legacy hosts: m1, m2",
    ]
    assert _union_of_notes([legacy, ecn])[1] == "dctcp = DCTCP in the switch on hosts tgen, m1, m2"
    assert _union_of_notes([]) == []
