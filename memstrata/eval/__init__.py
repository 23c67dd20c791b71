"""Evaluation harnesses (DESIGN §11); run them with ``memstrata eval``."""
