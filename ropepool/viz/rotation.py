"""Plots: rotation (to be written)."""
