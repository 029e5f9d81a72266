"""What Hermes writes and where: its storage conventions, a home's folders and profiles."""
