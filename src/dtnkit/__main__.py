"""`python -m dtnkit` runs the command line."""

from dtnkit.cli.main import entry

entry()
