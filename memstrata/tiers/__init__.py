"""The memory tiers of DESIGN §3: working (recent turns), mid (topic segments), long (facts)."""
