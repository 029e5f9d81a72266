"""The read front: one method per screen, each in one read snapshot."""
