"""Pure domain model: no I/O, no clock, no randomness, no SDK imports.

Everything here is deterministic so Temporal workflows can call it and tests need no fixtures.
"""
