"""What is durable: conversations, their append-only event log, receipts, threads, actions.

The database is the source of truth. The event log doubles as the turn queue: the user
messages after ``Conversation.answered_seq`` are what the next turn answers.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from poppy_django import ids


class Status(models.TextChoices):
    WORKING = "working"
    IDLE = "idle"
    QUEUED = "queued"
    CLOSED = "closed"


class Responder(models.TextChoices):
    AGENT = "agent"
    HUMAN = "human"


class Role(models.TextChoices):
    """Whose side a message is from: the personal agent's User, or the company."""

    USER = "user"
    COMPANY = "company"


class Sender(models.TextChoices):
    """Who on that side wrote it: an agent, or a person."""

    AGENT = "agent"
    HUMAN = "human"


class AuthorizationError(models.TextChoices):
    """Why an ``authorization`` event stopped a turn: the User must sign in, or grant more."""

    SIGN_IN_REQUIRED = "sign_in_required"
    INSUFFICIENT_SCOPE = "insufficient_scope"


class Conversation(models.Model):
    """One conversation between a personal agent (for one User) and the Company."""

    id = models.CharField(primary_key=True, max_length=64, default=ids.new_conversation_id)
    client_id = models.CharField(max_length=512, help_text=_("The personal agent's client_id."))
    user_id = models.CharField(max_length=512, help_text=_("The pairwise User id."))
    #: Set the first time the conversation is used signed in; it then belongs to the account.
    account_id = models.CharField(max_length=256, null=True, blank=True, db_index=True)
    parent = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="direct_conversations",
        help_text=_("Set on a Direct Conversation: the conversation it was opened from."),
    )
    #: Set once a Direct Conversation is opened from it: only then can one be open, so only
    #: then does a message look for one.
    opened_direct = models.BooleanField(default=False)
    agent_name = models.CharField(max_length=128)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.IDLE)
    responder = models.CharField(max_length=16, choices=Responder.choices, default=Responder.AGENT)
    context = models.JSONField(default=dict, blank=True)
    #: The sequence number of the newest event (events are numbered from 1).
    last_seq = models.PositiveBigIntegerField(default=0)
    #: The newest user message that has been answered (or handed to a person).
    answered_seq = models.PositiveBigIntegerField(default=0)
    #: The last user message of the turn in flight: a turn retried after a crash answers
    #: exactly the same messages (so its reply and action keys are the same).
    turn_upto_seq = models.PositiveBigIntegerField(default=0)
    #: Events with a lower sequence number were pruned: cursors into them are expired.
    pruned_before_seq = models.PositiveBigIntegerField(default=0)
    #: The worker writing this conversation now, and until when its claim holds.
    lease_owner = models.CharField(max_length=64, null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    #: How many times the turn in flight was started: a turn whose worker dies every time
    #: (a poison message) is answered with the failed-turn message after TURN_MAX_ATTEMPTS.
    turn_attempts = models.PositiveSmallIntegerField(default=0)
    #: On a thread root (a conversation that is not Direct): the worker running a turn in its
    #: agent thread, from either the conversation or its Direct Conversation — one at a time.
    thread_owner = models.CharField(max_length=64, null=True, blank=True)
    thread_expires_at = models.DateTimeField(null=True, blank=True)
    #: When the pending handoff was asked for: the desk serves the oldest first.
    handoff_requested_at = models.DateTimeField(null=True, blank=True)
    #: Who asked for the last handoff ("personal_agent" | "company_agent"), and the Company
    #: Agent's reason when it did (desk only): the queue says why a person is needed.
    handoff_initiator = models.CharField(max_length=16, blank=True, default="")
    handoff_reason = models.TextField(blank=True, default="")
    #: The one staff member (username) the conversation is with: its holder while a person
    #: has it, the teammate it is assigned to while it waits (desk only; never on the wire).
    assignee = models.CharField(max_length=150, blank=True, default="")
    #: The team (a group named in ``POPPY["DESK_TEAMS"]``) the conversation is for: its
    #: handoffs go to that team's members ("" for the whole desk; desk only).
    team = models.CharField(max_length=150, blank=True, default="", db_index=True)
    #: The desk's tags (staff only, never on the wire): set at the desk, by the Company
    #: Agent's tools (``ToolContext.tag``) and by ``POPPY["TAG_RULES"]``.
    tags: models.ManyToManyField[Tag, ConversationTag] = models.ManyToManyField(
        "Tag", through="ConversationTag", related_name="conversations", blank=True
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-updated_at"]
        indexes = [
            models.Index(fields=["client_id", "user_id"], name="poppy_conv_owner"),
            models.Index(fields=["status", "lease_expires_at"], name="poppy_conv_status_lease"),
            # The desk's "mine" and "unassigned" views.
            models.Index(fields=["assignee", "status"], name="poppy_conv_assignee"),
        ]
        permissions = [
            ("handle_conversations", "Can handle Poppy conversations at the desk"),
            ("view_desk_reports", "Can see the support desk's reports"),
        ]

    def __str__(self) -> str:
        return self.id

    @property
    def is_direct(self) -> bool:
        return self.parent_id is not None

    @property
    def thread_root_id(self) -> str:
        """Direct Conversations answer in their parent's agent threads."""
        return self.parent_id or self.id


class EventType(models.TextChoices):
    MESSAGE = "message"
    STATE = "state"
    AUTHORIZATION = "authorization"
    USER_REQUESTED = "user_requested"
    DIRECT_OPENED = "direct_opened"
    DIRECT_CLOSED = "direct_closed"


class Event(models.Model):
    """One entry of a conversation's append-only log; its public id is also a cursor."""

    id = models.BigAutoField(primary_key=True)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveBigIntegerField()
    type = models.CharField(max_length=32, choices=EventType.choices)
    #: The event's own wire fields (``message``, ``status``/``responder``, ``error``...).
    payload = models.JSONField(default=dict)
    #: Company-side facts never shown to personal agents (desk request id, staff user, turn).
    meta = models.JSONField(default=dict, blank=True)
    #: For message events: the message id, role and whether it starts a turn.
    message_id = models.CharField(max_length=256, null=True, blank=True)
    role = models.CharField(max_length=16, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["conversation", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["conversation", "seq"], name="poppy_event_seq"),
        ]
        indexes = [
            # A retried turn checks whether its reply (a stable message id) is written.
            models.Index(fields=["conversation", "message_id"], name="poppy_event_message"),
        ]

    def __str__(self) -> str:
        return self.public_id

    @property
    def public_id(self) -> str:
        return ids.event_id(self.conversation_id, self.seq)

    def to_wire(self) -> dict[str, Any]:
        return {
            "id": self.public_id,
            "type": self.type,
            "created_at": self.created_at.isoformat().replace("+00:00", "Z"),
            **self.payload,
        }


class MessageReceipt(models.Model):
    """The idempotency record of an inbound message: per User, across conversations."""

    client_id = models.CharField(max_length=512)
    user_id = models.CharField(max_length=512)
    message_id = models.CharField(max_length=256)
    #: sha256 of the message's meaningful content (and parent for a first message).
    fingerprint = models.CharField(max_length=64)
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="receipts"
    )
    #: The first delivery's answer: status code and body, replayed to retries.
    status_code = models.PositiveSmallIntegerField()
    answer = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["client_id", "user_id", "message_id"], name="poppy_receipt_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.message_id} → {self.conversation_id}"


class AgentThread(models.Model):
    """The Company Agent's memory for one actor in one conversation (Directs share it)."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="threads")
    actor_id = models.CharField(max_length=256)
    #: The position of the newest entry (0: none yet): appending reads no entry.
    last_position = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["conversation", "actor_id"], name="poppy_thread_actor"),
        ]

    def __str__(self) -> str:
        return f"{self.conversation_id}/{self.actor_id}"

    @property
    def history(self) -> list[dict[str, str]]:
        """Every entry, oldest first, for people and tests: a turn reads only its window."""
        return [entry.as_dict() for entry in self.entries.order_by("position")]


class AgentThreadEntry(models.Model):
    """One thing the model has seen in a thread: appended once, never rewritten.

    One row per entry, so a turn costs the same in a thread's first hour and its thousandth
    turn: it appends its own entries and reads the newest ``THREAD_HISTORY_ENTRIES``.
    """

    #: No index of its own: the (thread, position) constraint's index serves it.
    thread = models.ForeignKey(
        AgentThread, on_delete=models.CASCADE, related_name="entries", db_index=False
    )
    #: 1, 2, 3… within the thread, in the order the model saw them.
    position = models.PositiveIntegerField()
    #: ``user``, ``assistant`` or ``system``.
    role = models.CharField(max_length=16)
    text = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "agent thread entries"
        constraints = [
            models.UniqueConstraint(
                fields=["thread", "position"], name="poppy_thread_entry_position"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.thread_id}#{self.position} {self.role}"

    def as_dict(self) -> dict[str, str]:
        return {"role": self.role, "text": self.text}


class ActionStatus(models.TextChoices):
    PENDING = "pending"
    AWAITING_APPROVAL = "awaiting_approval"
    #: Proposed instead of run, by the part that plugs in through
    #: :mod:`poppy_django.agent.proposals` (the Operations extension: the User confirms one
    #: revision of it, and a worker performs it then; see docs/operations-extension).
    PROPOSED = "operation_proposed", "Operation Proposed"
    #: Approved by a person; a worker runs it (once) and posts its outcome.
    APPROVED = "approved"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    REJECTED = "rejected"


class ActionRecord(models.Model):
    """An action tool call: executed at most once per turn, whatever happens to the worker."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="actions")
    #: Stable per turn and call (turn id + tool + arguments): the at-most-once key.
    call_key = models.CharField(max_length=64)
    tool = models.CharField(max_length=128)
    arguments = models.JSONField(default=dict)
    summary = models.TextField(blank=True, default="")
    status = models.CharField(
        max_length=24, choices=ActionStatus.choices, default=ActionStatus.PENDING
    )
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    #: The actor and roles the call was proposed under: approval later runs it under these.
    actor_id = models.CharField(max_length=256)
    account_id = models.CharField(max_length=256, null=True, blank=True)
    roles = models.JSONField(default=list)
    decided_by = models.CharField(max_length=150, blank=True, default="")
    #: The desk request that decided it: echoed on the outcome message (``Event.meta``).
    request_id = models.CharField(max_length=64, blank=True, default="")
    #: Runs of an approved action started by workers: bounded, like a turn's attempts.
    attempts = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["conversation", "call_key"], name="poppy_action_call"),
        ]

    def __str__(self) -> str:
        return f"{self.tool} ({self.status})"

    def to_wire(self) -> dict[str, Any]:
        """The core's members of the outcome (a proposal adds its own:
        :func:`poppy_django.agent.proposals.outcome_of`)."""
        outcome: dict[str, Any] = {
            "tool": self.tool,
            "status": self.status,
            "summary": self.summary,
        }
        if self.result is not None:
            outcome["result"] = self.result
        if self.error:
            outcome["error"] = self.error
        return outcome


class SupportDesk(Conversation):
    """The desk's entry on the admin index: a proxy whose admin list opens the desk.

    No table of its own; staff who may handle conversations see "Support desk" beside
    "Conversations" on the admin's home page (:class:`poppy_django.admin.SupportDeskAdmin`).
    """

    class Meta:
        proxy = True
        verbose_name = "support desk"
        verbose_name_plural = "support desk"
        default_permissions = ()


class StaffPresence(models.Model):
    """Whether a staff member takes handoffs: their own choice (``away``), and a desk page of
    theirs open lately (``last_seen_at``, renewed by the desk's live connection).

    Available = not away and seen within ``POPPY["STAFF_AWAY_AFTER_SECONDS"]``
    (:mod:`poppy_django.staff.presence`).
    """

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="poppy_presence",
    )
    away = models.BooleanField(default=False, help_text=_("Set by the staff member."))
    last_seen_at = models.DateTimeField(null=True, blank=True)
    #: The last handoff the round robin gave them: the next goes to who waited longest.
    last_assigned_at = models.DateTimeField(null=True, blank=True)
    #: When their last live desk connection closed (None: never, or a desk page opened
    #: since): they left, even within ``STAFF_AWAY_AFTER_SECONDS``.
    left_at = models.DateTimeField(null=True, blank=True)
    capacity = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        help_text=_(
            "How many conversations they handle at once (waiting for them or held); "
            'blank: POPPY["DESK_CAPACITY"].'
        ),
    )
    in_rotation = models.BooleanField(
        default=False,
        help_text=_(
            "For supervisors (superusers and those who see the desk's reports): given "
            "handoffs too. Other staff are always in the rotation."
        ),
    )

    class Meta:
        verbose_name_plural = "staff presence"

    def __str__(self) -> str:
        return f"{self.user} ({'away' if self.away else 'on shift'})"


class DeskConnection(models.Model):
    """One open live connection of a desk page (its stream): while a staff member has one,
    they have a live desk. Removed when it closes; renewed while it stays open, so that one
    a crashed process never closed stops counting."""

    id = models.UUIDField(primary_key=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="poppy_desk_connections"
    )
    opened_at = models.DateTimeField()
    renewed_at = models.DateTimeField(db_index=True)

    class Meta:
        default_permissions = ()

    def __str__(self) -> str:
        return f"{self.user} since {self.opened_at:%H:%M:%S}"


class DeskEventKind(models.TextChoices):
    """What staff did that only staff see."""

    NOTE = "note"
    TOOK_OVER = "took_over"
    ASSIGNED = "assigned"
    TRANSFERRED = "transferred"
    UNASSIGNED = "unassigned"
    TAGGED = "tagged"
    UNTAGGED = "untagged"
    MACRO = "macro"
    #: Given to another teammate because the one it waited for went away or left.
    REASSIGNED = "reassigned"
    #: A missed customer followed up outside the conversation (the company's own channel).
    FOLLOWED_UP = "followed_up"
    #: Given to a team (``other``): its queue, and one of its members.
    TO_TEAM = "to_team"


class DeskEvent(models.Model):
    """The desk's own log of a conversation: private notes, take-overs, assignments.

    Never on the wire: a table of its own, which no personal agent's read, stream, MCP
    answer, operation, feedback or export reads (only the desk and the service API do).
    """

    id = models.BigAutoField(primary_key=True)
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="desk_events"
    )
    kind = models.CharField(max_length=16, choices=DeskEventKind.choices)
    #: The staff member who did it (username).
    by = models.CharField(max_length=150)
    #: The other staff member: who it was given to (assigned, transferred), or taken from
    #: (took_over, unassigned); "" for a note.
    other = models.CharField(max_length=150, blank=True, default="")
    #: The note, or the note a transfer or an assignment carries.
    text = models.TextField(blank=True, default="")
    #: The conversation's ``last_seq`` when it was written: where it sits in the transcript.
    after_seq = models.PositiveBigIntegerField()
    #: The desk request that wrote it (its correlation id), as on ``Event.meta``.
    request_id = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["conversation", "id"]

    def __str__(self) -> str:
        return f"{self.conversation_id} {self.kind} by {self.by}"


class CannedReply(models.Model):
    """A reply staff insert from the reply box (typing ``/`` and its shortcut), managed in
    the admin; placeholders are filled for the conversation (:mod:`poppy_django.staff.canned`).
    """

    shortcut = models.SlugField(max_length=50, unique=True, help_text=_("Typed after / ."))
    title = models.CharField(max_length=120)
    text = models.TextField(
        max_length=5000,
        help_text=_(
            "Placeholders: {name} (the User's name), {order} (the order in context); "
            "a fallback after |, as in {name|there}."
        ),
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["shortcut"]
        verbose_name_plural = "canned replies"

    def __str__(self) -> str:
        return f"/{self.shortcut} {self.title}"


class Tag(models.Model):
    """A label staff sort conversations by ("refund", "vip"): staff only, never on the wire.

    Made the first time something tags a conversation with it (the desk, a tool, a rule);
    renamed or deleted in the admin.
    """

    name = models.SlugField(
        max_length=50, unique=True, help_text=_("Lower case letters, digits, - and _.")
    )
    description = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ConversationTag(models.Model):
    """One tag on one conversation, and who put it there."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="tagging")
    tag = models.ForeignKey(Tag, on_delete=models.CASCADE, related_name="tagging")
    #: A staff member's username, ``company_agent`` (a tool) or ``rule`` (``TAG_RULES``).
    by = models.CharField(max_length=150)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["conversation", "tag"], name="poppy_conversation_tag"),
        ]

    def __str__(self) -> str:
        return f"{self.conversation_id} #{self.tag_id}"


class MacroThen(models.TextChoices):
    """What a macro does last, after its reply and its tags."""

    KEEP = "keep", _("keep the conversation")
    LEAVE = "leave", _("give it back to the Company Agent")
    CLOSE = "close", _("close it")


class Macro(models.Model):
    """Several desk steps in one: a reply (a canned reply's text and placeholders), tags, a
    teammate to give it to, and what then (keep it, give it back to the agent, close).

    Run from a conversation's page, as one decision: all its steps happen, or none
    (:func:`poppy_django.service.run_macro`).
    """

    shortcut = models.SlugField(max_length=50, unique=True)
    title = models.CharField(max_length=120)
    reply = models.TextField(
        max_length=5000,
        blank=True,
        default="",
        help_text=_("Sent to the customer first (optional); placeholders as in canned replies."),
    )
    tags = models.ManyToManyField(Tag, blank=True, related_name="macros")
    give_to = models.CharField(
        max_length=150,
        blank=True,
        default="",
        help_text=_("A teammate's username: assigned (waiting) or transferred (held) to them."),
    )
    then = models.CharField(max_length=8, choices=MacroThen.choices, default=MacroThen.KEEP)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["shortcut"]

    def __str__(self) -> str:
        return f"{self.title} ({self.shortcut})"


class HandoffOutcome(models.TextChoices):
    """What came of a request for a person, as the team's reports count it."""

    WAITING = "waiting"
    JOINED = "joined"
    #: Answered at once that no one could take it (nobody on shift, outside office hours,
    #: a staff member's *Unavailable*).
    UNAVAILABLE = "unavailable"
    #: It waited and nobody joined (timed out, or given back).
    MISSED = "missed"
    #: The customer closed the conversation while it waited.
    CANCELLED = "cancelled"


class HandoffRecord(models.Model):
    """One request for a person and what came of it: the support team's reports read these.

    Written with the change it records (in its transaction), and kept when the events are
    pruned. A person joining a conversation nobody handed off is recorded too (initiator
    ``staff``). Never on the wire.
    """

    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="handoff_records"
    )
    #: "personal_agent" | "company_agent" | "staff" (a person joined unasked).
    initiator = models.CharField(max_length=16)
    requested_at = models.DateTimeField(db_index=True)
    outcome = models.CharField(
        max_length=12, choices=HandoffOutcome.choices, default=HandoffOutcome.WAITING
    )
    #: When it was joined, found unavailable, missed or cancelled.
    outcome_at = models.DateTimeField(null=True, blank=True)
    #: Why no one took it (unavailable, missed): what the customer was told, or ``timed_out``.
    reason = models.TextField(blank=True, default="")
    #: Who joined it; for a missed handoff, whom it waited for ("" for no one).
    staff = models.CharField(max_length=150, blank=True, default="")
    #: The team it was for ("" for the whole desk).
    team = models.CharField(max_length=150, blank=True, default="")
    #: The first message a person wrote after joining, and who wrote it.
    first_response_at = models.DateTimeField(null=True, blank=True)
    first_response_by = models.CharField(max_length=150, blank=True, default="")
    #: When the person part ended: given back to the Company Agent, or closed.
    ended_at = models.DateTimeField(null=True, blank=True)
    #: A missed or unavailable handoff's follow-up: when a person joined the conversation
    #: later, or marked it followed up elsewhere, and who (the desk's missed view).
    followed_up_at = models.DateTimeField(null=True, blank=True)
    followed_up_by = models.CharField(max_length=150, blank=True, default="")

    class Meta:
        ordering = ["-requested_at"]
        indexes = [
            models.Index(fields=["conversation", "outcome"], name="poppy_handoff_open"),
        ]

    def __str__(self) -> str:
        return f"{self.conversation_id} {self.outcome}"


class CsatSurvey(models.Model):
    """A satisfaction survey asked after a person handled a conversation, and its answer.

    Asked as a company message with a ``csat_survey`` component (its fallback text asks for
    a number, so a personal agent that knows nothing of it still can answer); the answer is
    a message (``data.csat``, or a text such as "4 - quick and kind").
    """

    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="csat_surveys"
    )
    #: The survey message's id (a ``data.csat`` answer names it as ``survey_id``) and
    #: sequence number (a text answer counts only while it is the last message).
    message_id = models.CharField(max_length=64)
    seq = models.PositiveBigIntegerField()
    #: The staff member who handled it, and their team ("" for none).
    staff = models.CharField(max_length=150, blank=True, default="")
    team = models.CharField(max_length=150, blank=True, default="")
    asked_at = models.DateTimeField(db_index=True)
    rating = models.PositiveSmallIntegerField(null=True, blank=True)
    comment = models.TextField(blank=True, default="")
    answered_at = models.DateTimeField(null=True, blank=True)
    #: "data" (the component's answer) or "text" (a number in words).
    answered_with = models.CharField(max_length=8, blank=True, default="")

    class Meta:
        ordering = ["-asked_at"]
        verbose_name = "CSAT survey"

    def __str__(self) -> str:
        return f"{self.conversation_id} {self.rating or '-'}"


class FeedbackReport(models.Model):
    """A personal agent's report of a task it could not do here (Poppy draft 0.2 §8).

    What the task was, never who the User is: the Session's ids tell which personal agent
    and pairwise User sent it. Sizes are bounded (:mod:`poppy_django.api.feedback`).
    """

    kind = models.CharField(max_length=64)
    task = models.CharField(max_length=200)
    description = models.TextField(max_length=2000)
    client_id = models.CharField(max_length=512)
    user_id = models.CharField(max_length=256)
    session_id = models.CharField(max_length=256, blank=True)
    signed_in = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.task


# The Operations extension's models live with it; imported here because Django loads an
# app's models from its models module (the one upward import the layers contract allows;
# nothing here uses them).
from poppy_django.operations.models import Operation, OperationRevision  # noqa: E402

__all__ = [
    "ActionRecord",
    "ActionStatus",
    "AgentThread",
    "AgentThreadEntry",
    "CannedReply",
    "Conversation",
    "ConversationTag",
    "CsatSurvey",
    "DeskEvent",
    "DeskEventKind",
    "Event",
    "EventType",
    "FeedbackReport",
    "HandoffOutcome",
    "HandoffRecord",
    "Macro",
    "MacroThen",
    "MessageReceipt",
    "Operation",
    "OperationRevision",
    "Responder",
    "StaffPresence",
    "Status",
    "SupportDesk",
    "Tag",
]
