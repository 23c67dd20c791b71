"""The network surfaces of memstrata: thin adapters over one shared ``MemoryOS``.

``memstrata.server.rest.create_app(memory)`` builds the REST API (FastAPI; ``memstrata serve``
runs it with uvicorn).  Nothing is imported here, so that loading one surface does not load the
others.
"""
