"""Plots: gqa (to be written)."""
