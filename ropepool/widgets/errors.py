"""Widgets: errors (to be written)."""
