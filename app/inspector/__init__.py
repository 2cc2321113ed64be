"""The inspector beside the chat: what the model weighed at each token, layer by layer."""
