"""The Operations extension v1: exact approval of one revision, performed at most once.

On with ``POPPY["OPERATIONS"] = {"ENABLED": True}`` (docs/operations-extension.md):

- :mod:`~poppy_django.operations.service` — propose, revise, read, confirm, cancel;
- :mod:`~poppy_django.operations.perform` — the worker side (a plain function and
  :mod:`~poppy_django.operations.tasks`'s Celery task), and recovery;
- :mod:`~poppy_django.operations.views` / ``urls`` — the operations endpoint;
- :mod:`~poppy_django.operations.negotiation` — both sides must list ``operations`` v1.
"""
