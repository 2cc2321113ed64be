"""The chat: the conversation view, the input box, and the controller that streams answers."""
