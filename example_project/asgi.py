"""``uvicorn example_project.asgi:application`` (any number of processes).

``PoppyBodyLimit`` refuses an endpoint body over ``POPPY["MAX_BODY_BYTES"]`` before Django's
handler would read (and spool) all of it.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")

django_application = get_asgi_application()

from poppy_django.asgi import PoppyBodyLimit  # noqa: E402 - needs the settings configured

application = PoppyBodyLimit(django_application)
