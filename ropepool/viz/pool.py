"""Plots: pool (to be written)."""
