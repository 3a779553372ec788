"""The ``planmode`` command line."""

from planmode.cli.app import app, main

__all__ = ["app", "main"]
