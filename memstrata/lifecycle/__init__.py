"""Lifecycle and governance (DESIGN §5): states and transitions, versions and time, erasure."""
