"""Models: the store's models as a list, and loading the chosen one off the GUI thread."""
