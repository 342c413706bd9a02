"""Trace-driven MapReduce shuffle emulation (seed 002, in the spirit of MRemu).

No Hadoop and no computation: map tasks are sleeps of their traced duration; their outputs are
real bytes that reducers fetch over real TCP between the fabric's hosts, with a bounded number of
parallel copies per reducer, as Hadoop's shuffle does. What is measured is what the network
does to the job: shuffle flow completion times and the job completion time.

- :mod:`.trace`  -- the trace model (JSON), a synthetic generator and a Hadoop-sort-shaped trace
- :mod:`.agent`  -- the per-host transfer agent (serves map outputs, runs reducers)
- :mod:`.replay` -- placement of tasks on hosts, launching agents, collecting one job's result
"""
