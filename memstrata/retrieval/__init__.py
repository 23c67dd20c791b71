"""The read path: hybrid search (live and as of a past time), fusion, query
decomposition and context packing."""
