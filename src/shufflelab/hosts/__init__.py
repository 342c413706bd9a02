"""The multi-host backend over SSH: real machines listed in an inventory, driven with asyncssh.

inventory.py  the inventory TOML: hosts, how to reach them, the spec-host mapping    (pure)
control.py    asyncssh sessions: concurrent connects, commands that name host + step, SFTP
probe.py      what each host has (qdiscs, congestion controls, versions, ports, clock offset)
findings.py   what a probe means for a spec (refusals, warnings)                     (pure)
safety.py     only inventory addresses; never shape the SSH control interface unless allowed
lease.py      a lease file per host recording every change before it is made; restore, clean
commands.py   ``shufflelab doctor --hosts`` and ``shufflelab clean --hosts``
"""
