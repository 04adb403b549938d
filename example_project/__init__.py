"""Acme Outfitters: a real Django project that uses poppy_django."""

from example_project.celery import app as celery_app

__all__ = ["celery_app"]
