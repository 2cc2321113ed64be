"""The app on the desktop: start-up checks, theme and resources, logging, one instance per
user, the launcher-menu entry, About and the self-test."""
