"""Database backends a project names in ``DATABASES[...]["ENGINE"]``."""
