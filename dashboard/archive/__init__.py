"""The copy of a Hermes home and keeping it in step with its source."""
