"""Plots: kernel (to be written)."""
