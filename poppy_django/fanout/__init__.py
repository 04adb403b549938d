"""Wake-ups and text deltas across processes.

:mod:`.bus` carries them to waiting readers: in-process when ``EVENTSTREAM_REDIS`` is unset
(the embedded default), over one Redis pub/sub channel between every web process and worker
when it is set. The path of a wake-up reads off the modules: :mod:`.publishing` sends it when
a write commits (and to the desk's browsers with django-eventstream), :mod:`.listening` is
where a waiting reader receives it, :mod:`.watchdog` catches the lost ones. :mod:`.versions`
keeps each conversation's version, set with its write's wake-up, by which a process's tail
of recent events tells that it heard all there is.
"""

from poppy_django.fanout.listening import ConversationListener, Delta, listen
from poppy_django.fanout.publishing import (
    DELTA,
    DESK_NEWS,
    NUDGE,
    conversation_channel,
    desk_channel,
    desk_news_on_commit,
    forget_version_on_commit,
    nudge_on_commit,
    publish_delta,
    publish_deltas,
    tell_conversations_desk,
)

__all__ = [
    "DELTA",
    "DESK_NEWS",
    "NUDGE",
    "ConversationListener",
    "Delta",
    "conversation_channel",
    "desk_channel",
    "desk_news_on_commit",
    "forget_version_on_commit",
    "listen",
    "nudge_on_commit",
    "publish_delta",
    "publish_deltas",
    "tell_conversations_desk",
]
