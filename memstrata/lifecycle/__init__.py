"""The lifecycle's rules: states and their legal transitions (``states``).

The calls that apply them (transitions, rollback, erasure, audit) are the core's:
``memstrata.memory.governance``."""
