"""Observability: structured moments, the request id, and logs that never quote a User.

:mod:`~poppy_django.observe.moments` logs and signals each moment that matters,
:mod:`~poppy_django.observe.request_id` carries the request's id, and
:mod:`~poppy_django.observe.redaction` keeps exception messages (which may quote what a User
wrote) out of every log record.
"""

from poppy_django.observe.correlation import Correlate
from poppy_django.observe.moments import moment
from poppy_django.observe.redaction import (
    WithholdUserText,
    describe_failure,
    withheld_traceback,
    withhold_user_text_in_logs,
)
from poppy_django.observe.request_id import begin_request, request_id

__all__ = [
    "Correlate",
    "WithholdUserText",
    "begin_request",
    "describe_failure",
    "moment",
    "request_id",
    "withheld_traceback",
    "withhold_user_text_in_logs",
]
