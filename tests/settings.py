"""The test settings: the example project, with the fake verifier unless a test swaps it."""

from example_project.settings import *  # noqa: F403
from example_project.settings import POPPY

POPPY = {**POPPY, "AUTHENTICATE": "poppy_django.verifier.fake.verify"}
