"""`lantern serve`: one process keeps a loaded model alive between `lantern run` calls (as
`ollama serve` does), speaking the part of Ollama's API that engine.remote's client speaks.
ARCHITECTURE.md §12."""
