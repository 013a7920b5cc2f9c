"""Widgets: pool (to be written)."""
