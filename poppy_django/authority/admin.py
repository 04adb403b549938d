"""Staff's view of the authority: clients (allow, block, pre-register), sign-ins (revoke:
"disconnect this agent") and Sessions (end). No credential is ever shown: Account Tokens and
device codes exist here only as hashes, which are not displayed."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import ngettext

from poppy_django.authority.models import Client, Grant, Session


def end_sessions(sessions: QuerySet[Session]) -> int:
    """:func:`poppy_django.authority.sessions.end_sessions`, imported when an action runs: the
    OAuth modules need the authority's extra (Authlib), the admin (development mode) does not."""
    from poppy_django.authority.sessions import end_sessions

    return end_sessions(sessions)


def revoke_grants(grants: QuerySet[Grant]) -> int:
    """:func:`poppy_django.authority.grants.revoke_grants`, imported when an action runs."""
    from poppy_django.authority.grants import revoke_grants

    return revoke_grants(grants)


class ClientForm(forms.ModelForm):
    """The Clients form, saying what each field does for a personal agent."""

    client_id = forms.URLField(
        max_length=512,
        assume_scheme="https",  # a client_id is an https URL
        help_text="The personal agent's HTTPS client_id URL, exactly as its assertions name "
        "it (their iss and sub), e.g. https://agent.example/client.",
    )

    class Meta:
        model = Client
        fields = ["client_id", "name", "status", "registered", "metadata", "jwks"]
        help_texts = {
            "name": "Shown to Users on the consent and connected-agents pages. Empty: the "
            "client_name of its metadata.",
            "status": "Blocked: new Sessions are refused and the block action ends its current "
            "ones.",
            "registered": 'Pre-registered by staff. Needed when POPPY_AUTHORITY["CLIENTS"] is '
            '"registered". With a JWKS below (and no fetch time), the metadata is never '
            "fetched: how to admit a client whose client_id cannot be fetched (a test agent "
            "on loopback, a partner's staging).",
            "metadata": "The client metadata document (client_id, jwks_uri, redirect_uris for "
            "Direct Sign-In, token_endpoint_auth_method private_key_jwt). Fetched from the "
            "client_id unless pre-registered; Direct Sign-In needs redirect_uris here.",
            "jwks": 'The public keys its assertions are signed with: {"keys": [{"kty": "EC", '
            '"crv": "P-256", "x": "…", "y": "…", "kid": "…", "alg": "ES256"}]}. Paste it to '
            "pre-register (poppy_chat --print-jwks prints one); never a private key.",
        }


@admin.register(Client)
class ClientAdmin(admin.ModelAdmin):
    form = ClientForm
    list_display = ("client_id", "name", "status", "registered", "fetched_at")
    list_filter = ("status", "registered")
    search_fields = ("client_id", "name")
    readonly_fields = ("fetched_at", "created_at")
    actions = ["take_down", "block", "allow", "register"]

    @admin.action(description="Take down: block, revoke its sign-ins, cancel its proposals")
    def take_down(self, request: HttpRequest, queryset: QuerySet[Client]) -> None:
        from poppy_django.authority.take_down import take_down

        done = take_down(list(queryset.values_list("client_id", flat=True)))
        self.message_user(
            request,
            f"Taken down: {done.clients} client(s), {done.sign_ins} sign-in(s) revoked, "
            f"{done.sessions} Session(s) ended, {done.operations} proposal(s) cancelled.",
            messages.SUCCESS,
        )

    @admin.action(description="Block: refuse new Sessions and end the current ones")
    def block(self, request: HttpRequest, queryset: QuerySet[Client]) -> None:
        count = queryset.update(status=Client.Status.BLOCKED)
        ended = end_sessions(Session.objects.filter(client__in=queryset))
        self.message_user(
            request,
            ngettext("%d client blocked", "%d clients blocked", count) % count
            + ngettext(", %d Session ended.", ", %d Sessions ended.", ended) % ended,
            messages.SUCCESS,
        )

    @admin.action(description="Allow")
    def allow(self, request: HttpRequest, queryset: QuerySet[Client]) -> None:
        count = queryset.update(status=Client.Status.ALLOWED)
        self.message_user(
            request, ngettext("%d client allowed.", "%d clients allowed.", count) % count
        )

    @admin.action(description="Pre-register")
    def register(self, request: HttpRequest, queryset: QuerySet[Client]) -> None:
        count = queryset.update(registered=True)
        self.message_user(
            request, ngettext("%d client registered.", "%d clients registered.", count) % count
        )


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):
    list_display = (
        "session_id",
        "client",
        "user_id",
        "account_id",
        "scope",
        "created_at",
        "ended_at",
    )
    list_filter = ("ended_at",)
    list_select_related = ("client",)
    raw_id_fields = ("client",)
    search_fields = ("session_id", "user_id", "account_id", "client__client_id")
    readonly_fields = ("session_id", "client", "user_id", "jkt", "created_at", "renewed_at")
    actions = ["end"]

    @admin.action(description="End (sign out) the selected Sessions")
    def end(self, request: HttpRequest, queryset: QuerySet[Session]) -> None:
        count = end_sessions(queryset)
        self.message_user(
            request, ngettext("%d Session ended.", "%d Sessions ended.", count) % count
        )


@admin.register(Grant)
class GrantAdmin(admin.ModelAdmin):
    list_display = ("account_id", "client", "scope", "method", "created_at", "revoked_at")
    list_filter = ("method", "revoked_at")
    list_select_related = ("client",)
    search_fields = ("account_id", "user_id", "client__client_id")
    readonly_fields = (
        "client",
        "user_id",
        "account_id",
        "scope",
        "method",
        "created_at",
        "revoked_at",
    )
    actions = ["disconnect"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Disconnect: revoke, signing out every Session signed in from it")
    def disconnect(self, request: HttpRequest, queryset: QuerySet[Grant]) -> None:
        count = revoke_grants(queryset)
        self.message_user(
            request, ngettext("%d sign-in revoked.", "%d sign-ins revoked.", count) % count
        )
