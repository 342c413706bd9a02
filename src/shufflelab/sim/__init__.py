"""The ``sim`` backend: a cluster-scale simulator of jobs, FIFO core pools and a shared network
(Rust core in ``crates/simcore``), the pushdown policies of seed 003, and its results store."""
