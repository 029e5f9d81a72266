"""Compiled templates kept on disk, so a restarted server renders its first page without
compiling the templates again (200-400 ms of a first overview)."""

from __future__ import annotations

from flask import Flask
from jinja2 import FileSystemBytecodeCache
from jinja2.bccache import Bucket


class TemplateCache(FileSystemBytecodeCache):
    """Jinja's file cache of compiled templates (each keyed by the template's name and a
    checksum of its source, and by Jinja's and Python's bytecode versions: an edited
    template or another Python compiles again), that never fails a page."""

    def load_bytecode(self, bucket: Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except OSError:
            pass  # the folder cannot be read (not a folder, no access): compiled from source

    def dump_bytecode(self, bucket: Bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:
            pass  # the folder refuses a write (gone, read-only, full): compiled next start


def init_app(app: Flask) -> None:
    """Keep compiled templates in ``TEMPLATE_CACHE`` (default: Jinja's own folder in the
    system's temporary directory, made private to the user, never Recall's data folder:
    a cache, not data, and no byte of it where a full disk would be Recall's)."""
    try:
        app.jinja_env.bytecode_cache = TemplateCache(app.config.get("TEMPLATE_CACHE") or None)
    except (OSError, RuntimeError):
        pass  # no private folder to be had: templates are compiled in memory, as before
