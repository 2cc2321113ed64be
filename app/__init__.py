"""The Lantern desktop app (Qt). Talks to the engine through its public API only."""
