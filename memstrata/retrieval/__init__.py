"""The read path: filters, keyword text, fusion and hybrid search (DESIGN §4)."""
