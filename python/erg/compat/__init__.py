"""Compatibility layers: ``erg.compat.zeus`` mirrors Zeus (ml-energy/zeus 0.16) module by module."""
