"""Web plumbing shared by every screen: security, HTMX rendering, errors, the reader."""
