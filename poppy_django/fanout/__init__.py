"""Wake-ups and text deltas across processes, over django-eventstream.

django-eventstream carries them: in-process when ``EVENTSTREAM_REDIS`` is unset (the
embedded default), over Redis pub/sub between every web process and worker when it is set.
The path of a wake-up reads off the modules: :mod:`.publishing` sends it when a write
commits, :mod:`.listening` is where a waiting reader receives it, :mod:`.watchdog` catches
the lost ones, and :mod:`.eventstream` is the one place that touches django-eventstream
beyond its public API.
"""

from poppy_django.fanout.listening import ConversationListener, Delta, listen
from poppy_django.fanout.publishing import (
    DELTA,
    DESK_CHANNEL,
    NUDGE,
    conversation_channel,
    nudge_on_commit,
    publish_delta,
)

__all__ = [
    "DELTA",
    "DESK_CHANNEL",
    "NUDGE",
    "ConversationListener",
    "Delta",
    "conversation_channel",
    "listen",
    "nudge_on_commit",
    "publish_delta",
]
