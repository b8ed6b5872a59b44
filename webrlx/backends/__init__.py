"""Backends: the small contract every device implements (base), and the implementations."""
