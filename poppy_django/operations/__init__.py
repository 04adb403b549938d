"""The Operations extension v1: exact approval of one revision, performed at most once.

On with ``POPPY["OPERATIONS"] = {"ENABLED": True}`` (docs/operations-extension.md):

- :mod:`~poppy_django.operations.service` — propose, revise, read, confirm, cancel;
- :mod:`~poppy_django.operations.perform` — the worker side (a plain function and
  its Celery task), and recovery;
- :mod:`~poppy_django.operations.views` / ``urls`` — the operations endpoint;
- :mod:`~poppy_django.operations.negotiation` — both sides must list ``operations`` v1.

A tool performing an operation raises :class:`OutcomeUnknown` when it cannot tell whether
the action happened (a provider that did not answer): the operation stays ``in_progress``,
is never performed again by recovery, and the company settles it later with
:func:`poppy_django.operations.service.settle`.
"""


class OutcomeUnknown(Exception):
    """Raised by an operation's tool: whether the action happened is not known yet.

    Its message says so to the User (the operation's result while ``in_progress``). The
    tool's database effects in that call are rolled back; what it sent outside is the
    company's to settle.
    """
