"""Lantern's desktop application (Qt only; talks to the engine through its public API)."""
