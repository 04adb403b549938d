from __future__ import annotations

from django.apps import AppConfig


class PoppyDjangoConfig(AppConfig):
    name = "poppy_django"
    verbose_name = "Poppy conversations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Wire the parts into the core: the checks, the log redaction, recovery, and the
        seams the desk, the MCP server and the Operations extension register (each reads
        its own settings when asked). Imported here because Django imports this module
        before the models are ready."""
        from django.core.signals import request_started
        from django.db import DEFAULT_DB_ALIAS
        from django.db.backends.signals import connection_created

        # Here, not at the top: Django imports this module before the models are ready.
        from poppy_django import checks, handoff, observe, threads
        from poppy_django.api import wire_errors
        from poppy_django.asgi import PoppyBodyLimit
        from poppy_django.desk import seams as desk
        from poppy_django.engine import executors, recovery
        from poppy_django.fanout import bus, publishing
        from poppy_django.mcp import seams as mcp
        from poppy_django.observe import metrics, pool_warnings, sdk, streaks
        from poppy_django.operations import seams as operations
        from poppy_django.service import rerouting
        from poppy_django.store import backends

        checks.register(body_limit=PoppyBodyLimit)
        desk.register()
        mcp.register()
        operations.register()
        # Handoffs no one joined in time go back to the Company Agent at each sweep.
        recovery.recoveries.register("overdue handoffs", lambda stop: handoff.return_overdue())
        # ...those waiting for someone with no live desk go to someone who has one, and those
        # waiting for room to whoever has it.
        recovery.recoveries.register("stranded handoffs", lambda stop: rerouting.reroute())
        observe.withhold_user_text_in_logs()
        pool_warnings.install()  # psycopg_pool's warnings once a streak (a database down)
        # The database's gauges read with their statements bounded, by the store's statement.
        metrics.bound_statements = backends.for_alias(DEFAULT_DB_ALIAS).bound_statements
        # Redis away: its unpublished wake-ups and events once a streak, not one per message.
        publishing.report_failures_to(streaks.Streak(publishing.logger, "publishing on Redis"))
        # ...and the bus's subscriptions' lost and refused attempts, as the revocations' are.
        bus.report_subscription_failures_to(
            streaks.Streak(bus.logger, "subscribing to Redis for wake-ups")
        )
        connection_created.connect(wire_errors.database_answers, dispatch_uid="poppy_db_again")
        sdk.at_start()
        request_started.connect(executors.recover_on_request, dispatch_uid="poppy_recovery")
        # Quick (it starts the in-process engine's threads once): an endpoint request's
        # request_started may run on the event loop with it (poppy_django.threads).
        threads.runs_on_loop(executors.recover_on_request)
