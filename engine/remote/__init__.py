"""Remote engines behind the same chat protocol: an OpenAI-compatible server (vLLM, SGLang,
llama-server, LM Studio, Ollama's /v1) or Ollama's native API. Standard-library HTTP only.
"""
