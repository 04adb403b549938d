"""Read-only admin lists of what is stored; the Conversation admin also mounts the desk."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from poppy_django.desk.admin import DeskAdminMixin
from poppy_django.models import (
    ActionRecord,
    AgentThread,
    AgentThreadEntry,
    Conversation,
    Event,
    MessageReceipt,
    Operation,
    OperationRevision,
)


class ReadOnlyAdmin(admin.ModelAdmin):
    """The log is append-only: staff look, the service API writes."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Conversation)
class ConversationAdmin(DeskAdminMixin, ReadOnlyAdmin):
    list_display = ["id", "status", "responder", "client_id", "account_id", "parent", "updated_at"]
    list_filter = ["status", "responder"]
    search_fields = ["id", "client_id", "account_id"]
    raw_id_fields = ["parent"]
    list_select_related = ["parent"]


@admin.register(Event)
class EventAdmin(ReadOnlyAdmin):
    list_display = ["conversation", "seq", "type", "role", "created_at"]
    list_filter = ["type"]
    search_fields = ["conversation__id", "message_id"]
    list_select_related = ["conversation"]
    raw_id_fields = ["conversation"]


@admin.register(MessageReceipt)
class MessageReceiptAdmin(ReadOnlyAdmin):
    list_display = ["message_id", "conversation", "client_id", "status_code", "created_at"]
    search_fields = ["message_id", "conversation__id"]
    list_select_related = ["conversation"]
    raw_id_fields = ["conversation"]


@admin.register(AgentThread)
class AgentThreadAdmin(ReadOnlyAdmin):
    list_display = ["conversation", "actor_id", "last_position", "updated_at"]
    search_fields = ["conversation__id", "actor_id"]
    list_select_related = ["conversation"]
    raw_id_fields = ["conversation"]


@admin.register(AgentThreadEntry)
class AgentThreadEntryAdmin(ReadOnlyAdmin):
    """A thread's entries, a page at a time (a long thread has thousands)."""

    list_display = ["thread", "position", "role", "created_at"]
    list_filter = ["role"]
    search_fields = ["thread__conversation__id", "thread__actor_id"]
    list_select_related = ["thread"]
    raw_id_fields = ["thread"]


@admin.register(ActionRecord)
class ActionRecordAdmin(ReadOnlyAdmin):
    list_display = ["tool", "status", "summary", "conversation", "created_at"]
    list_filter = ["status", "tool"]
    search_fields = ["conversation__id", "tool"]
    list_select_related = ["conversation"]
    raw_id_fields = ["conversation"]


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
