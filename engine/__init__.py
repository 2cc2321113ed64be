"""Lantern's engine: Ollama store, GGUF, tokenizer, prompts, ONNX graphs, runtime. No Qt here."""

__version__ = "0.1.0"
