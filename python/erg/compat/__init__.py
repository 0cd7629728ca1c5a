"""Compatibility layers: ``erg.compat.zeus`` mirrors Zeus's monitor API."""
