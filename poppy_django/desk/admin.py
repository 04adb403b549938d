"""Puts the desk into the Django admin, on the Conversation admin's own URLs."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.urls import URLPattern

from poppy_django.desk.permissions import can_handle
from poppy_django.desk.urls import desk_urls


class DeskAdminMixin(admin.ModelAdmin):
    """Adds ``desk/`` (queue, conversations, live stream, actions) and a link to it.

    Mixed into ``poppy_django.admin.ConversationAdmin``; a project that registers its own
    Conversation admin mixes it in too to keep the desk.
    """

    change_list_template = "poppy_django/desk/conversation_change_list.html"

    def get_urls(self) -> list[URLPattern]:
        return [*desk_urls(self.admin_site), *super().get_urls()]

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Desk staff find the desk from the admin index: the Conversations list links to it.
        return super().has_view_permission(request, obj) or can_handle(request.user)
