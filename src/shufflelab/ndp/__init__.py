"""Near-data processing (seed 003, prototype): pushdown plans, their validation and execution.

- :mod:`.plan`    -- the typed, versioned pushdown plan (JSON) and its validation against a schema
- :mod:`.execute` -- running a validated plan with DuckDB over Arrow data; combining partial aggregates
"""
