"""Recall: a local dashboard over an agent's memory (Hermes Agent's state.db and USER.md)."""

__version__ = "0.1.0"
