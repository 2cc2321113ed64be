"""The user's settings: the JSON file they persist in, and the dialog that edits them."""
