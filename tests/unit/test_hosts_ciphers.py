"""The SSH backend's cipher order: AES-GCM first where the controller's processor has AES
instructions (deploy's SFTP copies are cheaper with it), asyncssh's own order otherwise."""

from __future__ import annotations

from pathlib import Path

from shufflelab.hosts.control import _aes_instructions, cipher_preference

ASYNCSSH = [
    "chacha20-poly1305@openssh.com",
    "aes256-gcm@openssh.com",
    "aes128-gcm@openssh.com",
    "aes256-ctr",
    "aes192-ctr",
    "aes128-ctr",
]


def test_aes_gcm_first_with_aes_instructions_and_nothing_dropped() -> None:
    got = cipher_preference(ASYNCSSH, aes_instructions=True)
    assert got[:3] == ["aes128-gcm@openssh.com", "aes256-gcm@openssh.com", "chacha20-poly1305@openssh.com"]
    assert sorted(got) == sorted(ASYNCSSH)


def test_asyncssh_order_without_aes_instructions() -> None:
    assert cipher_preference(ASYNCSSH, aes_instructions=False) == ASYNCSSH


def test_a_list_without_gcm_is_kept() -> None:
    assert cipher_preference(["aes128-ctr"], aes_instructions=True) == ["aes128-ctr"]


def test_aes_instructions_read_from_the_flags(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse2 aes avx2\n")
    assert _aes_instructions(info)
    info.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2 vaes_x\n")  # a flag that only contains the letters
    assert not _aes_instructions(info)
    assert not _aes_instructions(tmp_path / "missing")
