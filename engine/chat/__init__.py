"""The chat core every backend shares: messages and their edits, sampling options, prompt
tokens, the events an answer streams and the backend protocol. It imports no engine:
the local runtime (engine.runtime) and the servers (engine.remote) both build on it."""
