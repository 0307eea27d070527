"""The results database: an SQLite file (the default) or a PostgreSQL server, with one schema
and one list of migrations.

- :mod:`dtnkit.db.location`: what ``--db`` / ``$DTNKIT_DB`` name (a path, or a
  ``postgresql://`` URL whose password is never shown); light, imported at start-up;
- :mod:`dtnkit.db.backend`: a connection to either (psycopg imported only for a URL), the
  paramstyle and the few SQL differences handled once;
- :mod:`dtnkit.db.migrations`: the numbered migrations, as data, applied in order;
- :mod:`dtnkit.db.push`: ``dtnkit results push``: a host's rows into a shared store.
"""
