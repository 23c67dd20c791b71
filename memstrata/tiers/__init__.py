"""The memory tiers: working (recent turns), mid (topic segments), long (facts)."""
