"""Read-only admin lists of what is stored; the Conversation admin also mounts the desk.

Staff see Conversations (and, with the desk permission, the desk). The other models are the
app's internals (the event log, receipts, agent threads, action records): their lists are
for superusers debugging, so staff who handle conversations are not shown them.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.translation import ngettext

from poppy_django import service
from poppy_django.desk import bulk, queue, wording
from poppy_django.desk.admin import DeskAdminMixin
from poppy_django.desk.permissions import can_handle
from poppy_django.errors import PoppyError
from poppy_django.models import (
    ActionRecord,
    AgentThread,
    AgentThreadEntry,
    CannedReply,
    Conversation,
    CsatSurvey,
    Event,
    FeedbackReport,
    HandoffRecord,
    Macro,
    MacroThen,
    MessageReceipt,
    Operation,
    OperationRevision,
    StaffPresence,
    SupportDesk,
    Tag,
)
from poppy_django.staff import canned, presence


class ReadOnlyAdmin(admin.ModelAdmin):
    """The log is append-only: staff look, the service API writes."""

    def get_object(self, request: HttpRequest, object_id: str, from_field: Any = None) -> Any:
        """None (the admin's "does not exist") for an id holding U+0000, which no row's
        text key holds and PostgreSQL refuses in a query with an error (a 500): a desk URL
        with such an id matches no desk route and falls through to the change view here."""
        if "\x00" in object_id:
            return None
        return super().get_object(request, object_id, from_field)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class SuperuserOnlyAdmin(ReadOnlyAdmin):
    """An internal model: listed for superusers only, whatever permissions staff hold."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active and request.user.is_superuser)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_active and request.user.is_superuser)


class DeskStateFilter(admin.SimpleListFilter):
    """The desk's own tabs ("waiting for a person", "with a person"…): one vocabulary."""

    title = "state"
    parameter_name = "desk"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(item.key, item.label) for item in queue.FILTERS]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        chosen = queue.FILTERS_BY_KEY.get(self.value() or "")
        if chosen is None:
            return queryset
        me = request.user.get_username()
        return queryset.filter(
            pk__in=Conversation.objects.filter(chosen.condition(me)).values("pk")
        )


@admin.register(Conversation)
class ConversationAdmin(DeskAdminMixin, ReadOnlyAdmin):
    list_display = [
        "id",
        "state",
        "with_whom",
        "client_id",
        "account_id",
        "parent",
        "created_at",
        "handoff_requested_at",
        "updated_at",
    ]
    # The desk's tabs, in the desk's words (not the wire's "responder"), and its tags.
    list_filter = [DeskStateFilter, ("tags", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["id", "client_id", "account_id", "tags__name"]
    raw_id_fields = ["parent"]
    list_select_related = ["parent"]
    date_hierarchy = "created_at"
    actions = ["assign_selected", "tag_selected", "close_selected"]

    def has_handle_permission(self, request: HttpRequest) -> bool:
        """The bulk actions are the desk's: its permission, not the model's."""
        return can_handle(request.user)

    @admin.action(description="Assign the waiting ones to a teammate", permissions=["handle"])
    def assign_selected(
        self, request: HttpRequest, queryset: QuerySet[Conversation]
    ) -> HttpResponse | None:
        return self._bulk(request, queryset, "assign_selected", bulk.AssignForm, bulk.assign)

    @admin.action(description="Tag selected conversations", permissions=["handle"])
    def tag_selected(
        self, request: HttpRequest, queryset: QuerySet[Conversation]
    ) -> HttpResponse | None:
        return self._bulk(request, queryset, "tag_selected", bulk.TagForm, bulk.tag)

    @admin.action(description="Close selected conversations", permissions=["handle"])
    def close_selected(
        self, request: HttpRequest, queryset: QuerySet[Conversation]
    ) -> HttpResponse | None:
        return self._bulk(request, queryset, "close_selected", bulk.CloseForm, bulk.close)

    def _bulk(
        self,
        request: HttpRequest,
        queryset: QuerySet[Conversation],
        name: str,
        form_class: type[forms.Form],
        run: Any,
    ) -> HttpResponse | None:
        """Ask for what the action needs (and confirmation) on a page of its own, then do it
        to each conversation through the service API, and say what was refused and why."""
        ids = list(queryset.order_by("pk").values_list("pk", flat=True))
        form = form_class(request.POST if "apply" in request.POST else None)
        if not form.is_bound or not form.is_valid():
            action = self.get_action(name)
            return TemplateResponse(
                request,
                "poppy_django/desk/bulk_action.html",
                {
                    **self.admin_site.each_context(request),
                    "title": action[2] if action else name,
                    "opts": self.model._meta,
                    "action": name,
                    "form": form,
                    "ids": ids,
                    "checkbox": ACTION_CHECKBOX_NAME,
                },
            )
        outcome = run(ids, form, by=request.user.get_username())
        if outcome.done:
            count = len(outcome.done)
            self.message_user(
                request,
                ngettext("%d conversation changed.", "%d conversations changed.", count) % count,
                messages.SUCCESS,
            )
        for conversation_id, why in outcome.refused:
            self.message_user(request, f"{conversation_id}: not changed: {why}", messages.WARNING)
        return None

    @admin.display(description="state", ordering="status")
    def state(self, conversation: Conversation) -> str:
        """The desk's words, not the wire's status (``idle`` while a person holds it)."""
        return wording.status_label(conversation.status, conversation.responder)

    @admin.display(description="with")
    def with_whom(self, conversation: Conversation) -> str:
        """Whom it is with, as the desk's queue says it."""
        return service.holder(conversation) or "—"


@admin.register(Event)
class EventAdmin(SuperuserOnlyAdmin):
    list_display = ["conversation", "seq", "type", "role", "created_at"]
    list_filter = ["type"]
    search_fields = ["conversation__id", "message_id"]
    list_select_related = ["conversation"]
    raw_id_fields = ["conversation"]


@admin.register(MessageReceipt)
class MessageReceiptAdmin(SuperuserOnlyAdmin):
    list_display = ["message_id", "conversation", "client_id", "status_code", "created_at"]
    search_fields = ["message_id", "conversation__id"]
    list_select_related = ["conversation"]
    raw_id_fields = ["conversation"]


@admin.register(AgentThread)
class AgentThreadAdmin(SuperuserOnlyAdmin):
    list_display = ["conversation", "actor_id", "last_position", "updated_at"]
    search_fields = ["conversation__id", "actor_id"]
    list_select_related = ["conversation"]
    raw_id_fields = ["conversation"]


@admin.register(AgentThreadEntry)
class AgentThreadEntryAdmin(SuperuserOnlyAdmin):
    """A thread's entries, a page at a time (a long thread has thousands)."""

    list_display = ["thread", "position", "role", "created_at"]
    list_filter = ["role"]
    search_fields = ["thread__conversation__id", "thread__actor_id"]
    list_select_related = ["thread"]
    raw_id_fields = ["thread"]


@admin.register(ActionRecord)
class ActionRecordAdmin(SuperuserOnlyAdmin):
    list_display = ["tool", "status", "summary", "conversation", "created_at"]
    list_filter = ["status", "tool"]
    search_fields = ["conversation__id", "tool"]
    list_select_related = ["conversation"]
    raw_id_fields = ["conversation"]


@admin.register(SupportDesk)
class SupportDeskAdmin(ReadOnlyAdmin):
    """ "Support desk" on the admin's home page, for staff who may handle conversations."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return can_handle(request.user)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return can_handle(request.user)

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        return HttpResponseRedirect(
            reverse(f"{self.admin_site.name}:poppy_django_conversation_desk")
        )


@admin.register(FeedbackReport)
class FeedbackReportAdmin(ReadOnlyAdmin):
    """Personal agents' reports of tasks they could not do here (staff read them)."""

    list_display = ["created_at", "kind", "task", "client_id", "signed_in"]
    list_filter = ["kind", "signed_in"]
    search_fields = ["task", "description", "client_id"]
    date_hierarchy = "created_at"


class OperationRevisionInline(admin.TabularInline):
    model = OperationRevision
    extra = 0
    can_delete = False
    readonly_fields = ["revision", "summary", "terms", "revised_by", "created_at"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Operation)
class OperationAdmin(ReadOnlyAdmin):
    """Operations (the Operations extension), every channel's: API and MCP ones included."""

    list_display = ["operation_id", "tool", "state", "revision", "summary", "account_id"]
    list_filter = ["state", "tool"]
    search_fields = ["operation_id", "account_id", "conversation__id"]
    list_select_related = ["conversation"]
    raw_id_fields = ["conversation", "action_record"]
    inlines = [OperationRevisionInline]


@admin.register(StaffPresence)
class StaffPresenceAdmin(admin.ModelAdmin):
    """Each staff member's share of the desk's work: their capacity (conversations at once;
    blank: ``POPPY["DESK_CAPACITY"]``) and, for a supervisor, whether they are in the
    rotation. Presence itself is theirs to set at the desk."""

    list_display = ["user", "capacity", "in_rotation", "away", "last_seen_at"]
    list_editable = ["capacity", "in_rotation"]
    fields = ["user", "capacity", "in_rotation", "away", "last_seen_at", "left_at"]
    readonly_fields = ["user", "away", "last_seen_at", "left_at"]
    search_fields = ["user__username"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # a row is made as its staff member opens the desk


@admin.register(Tag)
class TagAdmin(admin.ModelAdmin):
    """The desk's tags: renamed, described or deleted here (they are made where used)."""

    list_display = ["name", "description", "created_at"]
    search_fields = ["name", "description"]


def unknown_placeholder_error(text: str) -> forms.ValidationError | None:
    """The error for placeholders the desk would not fill in (a typo: ``{nmae}``)."""
    unknown = canned.unknown_placeholders(text)
    if not unknown:
        return None
    known = ", ".join("{" + name + "}" for name in canned.PLACEHOLDERS)
    return forms.ValidationError(
        f"Unknown placeholder(s): {', '.join('{' + u + '}' for u in unknown)}. "
        f"Use {known}, with a fallback after | if you like ({{name|there}})."
    )


class MacroForm(forms.ModelForm):
    """A macro the desk can run: its placeholders known, its teammate on the desk, and one
    last step (a teammate to give it to, or giving it back, or closing it)."""

    class Meta:
        model = Macro
        fields = ["shortcut", "title", "reply", "tags", "give_to", "then"]

    def clean_reply(self) -> str:
        reply: str = self.cleaned_data["reply"]
        error = unknown_placeholder_error(reply)
        if error is not None:
            raise error
        return reply

    def clean_give_to(self) -> str:
        give_to: str = self.cleaned_data["give_to"].strip()
        if give_to:
            try:
                presence.staff_member(give_to)
            except PoppyError as exc:
                raise forms.ValidationError(exc.description or exc.code) from exc
        return give_to

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        if cleaned.get("give_to") and cleaned.get("then") != MacroThen.KEEP:
            raise forms.ValidationError(
                "Give it to a teammate, or give it back or close it: not both."
            )
        return cleaned


@admin.register(Macro)
class MacroAdmin(admin.ModelAdmin):
    """Macros, managed by whoever holds their model permissions (a support lead)."""

    form = MacroForm
    list_display = ["shortcut", "title", "give_to", "then", "updated_at"]
    search_fields = ["shortcut", "title", "reply"]
    filter_horizontal = ["tags"]


@admin.register(HandoffRecord)
class HandoffRecordAdmin(SuperuserOnlyAdmin):
    """What the reports count (the desk's reports page reads them for the team lead)."""

    list_display = ["requested_at", "conversation", "initiator", "outcome", "staff", "team"]
    list_filter = ["outcome", "initiator"]
    search_fields = ["conversation__id", "staff", "team"]
    raw_id_fields = ["conversation"]
    date_hierarchy = "requested_at"


@admin.register(CsatSurvey)
class CsatSurveyAdmin(SuperuserOnlyAdmin):
    list_display = ["asked_at", "conversation", "staff", "rating", "answered_with"]
    list_filter = ["rating", "answered_with"]
    search_fields = ["conversation__id", "staff", "comment"]
    raw_id_fields = ["conversation"]
    date_hierarchy = "asked_at"


class CannedReplyForm(forms.ModelForm):
    """A placeholder the desk would not fill in is refused here, not sent as ``{nmae}``."""

    class Meta:
        model = CannedReply
        fields = ["shortcut", "title", "text"]

    def clean_text(self) -> str:
        text: str = self.cleaned_data["text"]
        error = unknown_placeholder_error(text)
        if error is not None:
            raise error
        return text


@admin.register(CannedReply)
class CannedReplyAdmin(admin.ModelAdmin):
    """Canned replies, managed by whoever holds their model permissions (a support lead)."""

    form = CannedReplyForm
    list_display = ["shortcut", "title", "updated_at"]
    search_fields = ["shortcut", "title", "text"]
