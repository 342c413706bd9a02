"""The SSH backend against stand-in hosts: namespaces running real OpenSSH servers, reached only
over SSH. Each test checks the hosts' state directly (not through the backend)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shufflelab.hosts import inventory, lease
from shufflelab.hosts.control import HostError, HostKeyError, connect

from .conftest import Lab, sh

pytestmark = pytest.mark.root

PY = [sys.executable]
ENV = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
CONTROLLER = str(Path(__file__).with_name("controller.py"))


def _comm(pid: str) -> str:
    """A process's name; empty when it ended after it was listed (an SSH session closing, say)."""
    try:
        return Path(f"/proc/{pid}/comm").read_text()
    except OSError:
        return ""


def state(lab: Lab, i: int) -> dict[str, object]:
    """What the tests watch on stand-in host i, read directly from its namespace."""
    ns = lab.hosts[i].ns

    def root(dev: str) -> str:
        q = json.loads(sh("tc", "-j", "qdisc", "show", "dev", dev, "root", ns=ns))[0]
        return f"{q['kind']} {q['handle']}"

    return {
        "ecn": sh("sysctl", "-n", "net.ipv4.tcp_ecn", ns=ns).strip(),
        "ssai": sh("sysctl", "-n", "net.ipv4.tcp_slow_start_after_idle", ns=ns).strip(),
        "fin": sh("sysctl", "-n", "net.ipv4.tcp_fin_timeout", ns=ns).strip(),
        "data0": root("data0"),
        "data1": root("data1"),
        "tail": sorted(p for p in sh("ip", "netns", "pids", ns).split() if "tail" in _comm(p)),
    }


def cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*PY, "-m", "shufflelab.cli", *args], capture_output=True, text=True, env={**ENV, **env}, timeout=120
    )


def test_doctor_over_ssh(lab: Lab, tmp_path: Path) -> None:
    inv = lab.inventory(tmp_path / "inv.toml")
    r = cli("doctor", "--hosts", str(inv), "--json")
    assert r.returncode in (0, 1), r.stderr
    doc = json.loads(r.stdout)
    assert set(doc["hosts"]) == {"host1", "host2", "host3"}
    for h in doc["hosts"].values():
        assert h["error"] is None and h["root"]
        assert "htb" in h["qdiscs"] and "cubic" in h["congestion_controls"]
        assert h["control_interface"] == "ctl0" and h["data_interface_present"]
        assert 22 in h["listening_ports"]
        assert h["data_address"] and h["cpus"] >= 1
        assert abs(h["clock_offset_s"]) <= h["clock_uncertainty_s"] + 0.005  # one machine, one clock
    checks = {(f["host"], f["check"]): f for f in doc["findings"]}
    assert checks[("*", "java")]["level"] == "ok"
    # probed with the interpreter runs start on every host (the stand-ins' own python3 has no pyspark)
    assert checks[("*", "pyspark")]["level"] == "ok", checks[("*", "pyspark")]
    assert checks[("host1", "data interface")]["level"] == "ok"
    # every stand-in pinged the two others' data addresses (the data bridge) and they answered
    for h in ("host1", "host2", "host3"):
        assert checks[(h, "data network")]["level"] == "ok", checks[(h, "data network")]
        assert checks[(h, "data network")]["detail"].count("(10.") == 2, checks[(h, "data network")]
    # without a deploy_dir, deploy would bring what is missing at the controller's paths: the
    # stand-ins share this machine's files, so nothing
    assert checks[("host1", "deploy")]["level"] == "ok", checks[("host1", "deploy")]
    # the table form
    r = cli("doctor", "--hosts", str(inv))
    assert "host3" in r.stdout and "what it means" in r.stdout, r.stdout + r.stderr


def test_doctor_for_a_spec_refuses_cells(lab: Lab, tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(
        '[experiment]\nname = "t"\n[topology.bottleneck]\nrate_mbps = 50\n'
        '[hosts.h1]\nroles = ["spark-master"]\n[hosts.h2]\nroles = ["spark-worker"]\n[hosts.h3]\nroles = []\n'
        '[workload]\nname = "sort-aggregate"\nparams = { rows = 1000, partitions = 4 }\n'
        '[matrix]\n"tcp.congestion_control" = ["cubic", "dctcp"]\n'
    )
    r = cli("doctor", "--hosts", str(lab.inventory(tmp_path / "inv.toml")), "--spec", str(spec), "--json")
    assert r.returncode in (0, 1), r.stderr
    doc = json.loads(r.stdout)
    checks = {(f["host"], f["check"]): f for f in doc["findings"]}
    cells = checks[("*", "cells")]
    # dctcp is the userspace switch's DCTCP over cubic: the switch runs on a router host, which this
    # inventory does not name
    assert checks[("*", "cell cc=dctcp")]["level"] == "refuse"
    assert "needs the userspace switch" in checks[("*", "cell cc=dctcp")]["detail"]
    # ... and the shared topology needs a router host for both cells (below): neither can run
    assert cells["detail"] == "0 of 2 cells can run on these hosts" and r.returncode == 1
    # what the hosts backend itself cannot do, per scenario: the default shared topology needs a
    # router host (both cells; with one, the dctcp cell runs on its switch)
    backend = sorted(f["detail"] for f in doc["findings"] if f["check"] == "backend")
    assert len(backend) == 1, backend
    (shared,) = backend
    assert shared.startswith("topology.kind = 'shared'"), shared
    assert shared.endswith("(scenarios: cc=cubic, cc=dctcp)"), shared


def test_inventory_error_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "inv.toml"
    bad.write_text('[hosts.a]\naddress = "nowhere"\nagent = true\ndata_interface = "eth0"\n')
    # a terminal as wide as the message (at 80 columns a long temporary path wraps it mid-sentence)
    r = cli("doctor", "--hosts", str(bad), COLUMNS="1000")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"{bad}: hosts.a.address: 'nowhere' is not an IP address" in " ".join(r.stderr.split())


def test_host_key_mismatch_is_named(lab: Lab, tmp_path: Path) -> None:
    wrong = tmp_path / "known_hosts"
    other = lab.hosts[1].host_key_pub  # host2's key claimed for host1's address
    wrong.write_text("".join(f"{h.address} {other if h is lab.hosts[0] else h.host_key_pub}\n" for h in lab.hosts))
    inv = inventory.load(lab.inventory(tmp_path / "inv.toml"))
    inv = inv.model_copy(update={"ssh": inv.ssh.model_copy(update={"known_hosts": str(wrong)})})

    async def go() -> None:
        async with connect(inv):
            pass

    with pytest.raises(HostKeyError) as e:
        asyncio.run(go())
    assert e.value.host == "host1" and f"host key not verified against {wrong}" in str(e.value)


def test_unreachable_host_is_named(lab: Lab, tmp_path: Path) -> None:
    p = lab.inventory(tmp_path / "inv.toml")
    nobody = lab.hosts[-1].address.rsplit(".", 1)[0] + ".200"  # in the control subnet, no server there
    text = (
        p.read_text()
        .replace(f'"{lab.hosts[1].address}"', f'"{nobody}"')
        .replace("connect_timeout_s = 5", "connect_timeout_s = 2")
    )
    lines = [f"{nobody} {lab.hosts[1].host_key_pub}"] + [f"{h.address} {h.host_key_pub}" for h in lab.hosts]
    (tmp_path / "known").write_text("\n".join(lines) + "\n")
    p.write_text(text.replace(str(lab.known_hosts), str(tmp_path / "known")))
    r = cli("doctor", "--hosts", str(p))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"host host2 ({nobody}): connect: unreachable" in " ".join(r.stderr.split())


def test_failed_step_names_host_and_step(lab: Lab, tmp_path: Path) -> None:
    inv = inventory.load(lab.inventory(tmp_path / "inv.toml"))

    async def go() -> None:
        async with connect(inv, ["host3"]) as s:
            await s["host3"].run("read the moon", ["cat", "/nonexistent/moon"])

    with pytest.raises(HostError) as e:
        asyncio.run(go())
    assert str(e.value).startswith(
        f"host host3 ({lab.hosts[2].address}): read the moon: `cat /nonexistent/moon` exited 1"
    )


def test_control_interface_is_not_shaped_unless_allowed(lab: Lab, tmp_path: Path) -> None:
    before = state(lab, 0)

    async def shape(inv: inventory.Inventory) -> None:
        async with connect(inv, ["host1"]) as s, lease.leased(s, inv.ssh.lease_dir) as leases:
            await leases["host1"].replace_root_qdisc("ctl0", ["htb", "default", "1"])
            q = json.loads(sh("tc", "-j", "qdisc", "show", "dev", "ctl0", "root", ns=lab.hosts[0].ns))[0]
            assert q["kind"] == "htb"

    with pytest.raises(HostError, match="ctl0 carries the SSH control connection"):
        asyncio.run(shape(inventory.load(lab.inventory(tmp_path / "inv.toml"))))
    allowed = lab.inventory(tmp_path / "inv2.toml", extra={"host1.control_interface_shaping_allowed": "true"})
    asyncio.run(shape(inventory.load(allowed)))
    q = json.loads(sh("tc", "-j", "qdisc", "show", "dev", "ctl0", "root", ns=lab.hosts[0].ns))[0]
    assert q["handle"] == "0:"  # the kernel default is back
    assert state(lab, 0) == before
    assert sh("ls", "-A", "/var/lib/shufflelab/leases", ns=lab.hosts[0].ns, check=False).strip() == ""


def _start_controller(inv: Path, host: str) -> subprocess.Popen[str]:
    p = subprocess.Popen(
        [*PY, CONTROLLER, str(inv), host], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV
    )
    return p


def _read_until(p: subprocess.Popen[str], prefix: str) -> str:
    assert p.stdout is not None
    for line in p.stdout:
        if line.startswith(prefix):
            return line
    raise AssertionError(f"controller ended before {prefix!r}: {p.stderr.read() if p.stderr else ''}")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_mid_change_restores(lab: Lab, tmp_path: Path, sig: signal.Signals) -> None:
    before = state(lab, 1)
    p = _start_controller(lab.inventory(tmp_path / "inv.toml"), "host2")
    try:
        _read_until(p, "changed sysctl")  # the first change is made, the others are under way
        p.send_signal(sig)
        out, errs = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, errs
    assert state(lab, 1) == before
    assert sh("ls", "-A", "/var/lib/shufflelab/leases", ns=lab.hosts[1].ns, check=False).strip() == ""


def test_sigkill_then_clean_restores_exactly_the_lease(lab: Lab, tmp_path: Path) -> None:
    ns = lab.hosts[2].ns
    sh("sysctl", "-w", "net.ipv4.tcp_fin_timeout=33", ns=ns)  # unrelated state, changed by someone else
    sh("tc", "qdisc", "replace", "dev", "data1", "root", "handle", "7:", "pfifo", "limit", "77", ns=ns)
    before = state(lab, 2)
    inv = lab.inventory(tmp_path / "inv.toml")
    p = _start_controller(inv, "host3")
    try:
        lease_id = _read_until(p, "changed all").split()[-1]
        changed = state(lab, 2)
        assert changed["ecn"] == "1" and changed["ssai"] == "0" and changed["data0"].startswith("htb")
        assert len(changed["tail"]) == 1  # type: ignore[arg-type]
        p.kill()
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    doc = json.loads(sh("cat", f"/proc/{_sshd_pid(lab, 2)}/root/var/lib/shufflelab/leases/{lease_id}.json"))
    assert [c["kind"] for c in doc["changes"]] == ["sysctl", "sysctl", "qdisc", "process"]
    assert state(lab, 2) == changed  # nothing restored the host: the controller died
    r = cli("clean", "--hosts", str(inv))
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"host3: {lease_id} (4 changes)" in r.stdout and "restored 1 leases on 3 hosts" in r.stdout
    after = state(lab, 2)
    assert after == before, (before, after)
    assert after["fin"] == "33" and after["data1"] == "pfifo 7:"  # left alone
    r = cli("clean", "--hosts", str(inv))
    assert r.returncode == 0 and "restored 0 leases" in r.stdout


def _sshd_pid(lab: Lab, i: int) -> int:
    """The stand-in's OpenSSH server (its mount namespace holds the host's lease files)."""
    return lab.hosts[i].server_pid()


def test_clean_keeps_a_live_controllers_lease(lab: Lab, tmp_path: Path) -> None:
    before = state(lab, 0)
    inv = lab.inventory(tmp_path / "inv.toml")
    p = _start_controller(inv, "host1")
    try:
        lease_id = _read_until(p, "changed all").split()[-1]
        changed = state(lab, 0)
        r = cli("clean", "--hosts", str(inv))
        assert r.returncode == 0 and f"host1: {lease_id}" in r.stdout and "kept 1 leases" in r.stdout, r.stdout
        assert state(lab, 0) == changed  # its controller still runs: untouched
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert state(lab, 0) == before


def test_agent_auth_and_sftp(lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sock = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if sock.exists():
                break
            time.sleep(0.05)
        subprocess.run(["ssh-add", "-q", str(lab.client_key)], env={**ENV, "SSH_AUTH_SOCK": str(sock)}, check=True)
        p = lab.inventory(tmp_path / "inv.toml")
        p.write_text(p.read_text().replace(f'key_file = "{lab.client_key}"', "agent = true"))
        inv = inventory.load(p)
        assert all(h.agent and h.key_file is None for h in inv.hosts.values())
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
        payload = tmp_path / "payload.bin"
        payload.write_bytes(os.urandom(300_000))

        async def go() -> None:
            async with connect(inv) as sessions:
                for name, s in sessions.items():
                    await s.put("upload", payload, f"/tmp/slssh-{name}.bin")
                    await s.get("download", f"/tmp/slssh-{name}.bin", tmp_path / f"{name}.bin")
                    await s.run("remove", ["rm", "-f", f"/tmp/slssh-{name}.bin"])

        asyncio.run(go())
        for h in lab.hosts:
            assert (tmp_path / f"{h.name}.bin").read_bytes() == payload.read_bytes()
    finally:
        agent.terminate()
        agent.wait(timeout=10)


def test_the_stand_ins_login_shell_reads_none_of_this_machines_start_up_files(lab: Lab, tmp_path: Path) -> None:
    """A command over SSH runs through the login shell, which reads ~/.bashrc: on the stand-ins every
    start-up file this machine has reads empty (a version manager's init there once held every
    command for 60 s on a lock a killed shell left)."""
    from .conftest import SHELL_STARTUP, _shell_startup_files

    present = [f.name for f in _shell_startup_files()]
    if not present:
        pytest.skip("this machine's login user has no shell start-up files")
    inv = inventory.load(lab.inventory(tmp_path / "inv.toml"))
    each = '[ -f "$HOME/$f" ] && echo "$f $(wc -c < "$HOME/$f")"'
    script = f"for f in {' '.join(SHELL_STARTUP)}; do {each}; done; true"

    async def go() -> dict[str, str]:
        async with connect(inv) as sessions:
            return {name: (await s.run("start-up files", ["sh", "-c", script])).stdout for name, s in sessions.items()}

    for name, out in asyncio.run(go()).items():
        sizes = dict(line.split() for line in out.splitlines())
        assert sorted(sizes) == sorted(present), (name, out)
        assert set(sizes.values()) == {"0"}, (name, out)
