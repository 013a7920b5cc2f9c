"""Widgets: rotation (to be written)."""
