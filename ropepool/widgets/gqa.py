"""Widgets: gqa (to be written)."""
