"""Saved conversations: the SQLite history and the sidebar's list of them."""
