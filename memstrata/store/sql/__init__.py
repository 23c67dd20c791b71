"""The SQL layer both engines share: a ``Dialect`` (the words that differ, and the one place a
driver error becomes ours), ``SQLDatabase`` (what an engine provides) and the ``Store`` calls
written once over them (``SQLStore``)."""
