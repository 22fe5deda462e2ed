"""Graph passes: each a name plus a run method that reports whether it changed the module."""
