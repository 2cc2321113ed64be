"""The store's models read as GGUF: what each one is (describe) and how a GGUF file joins
the store (import). Above both engine.store and engine.gguf, which know nothing of each other."""
