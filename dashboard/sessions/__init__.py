"""One session as a person reads it: its transcript and which rows a view shows."""
