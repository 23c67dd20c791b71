"""Evaluation harnesses; run them with ``memstrata eval``."""
