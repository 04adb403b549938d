"""The support desk in the Django admin: the handoff queue, live transcripts, desk actions.

It is mounted by :class:`poppy_django.desk.admin.DeskAdminMixin` on the Conversation admin
(``/admin/poppy_django/conversation/desk/``), so any project with the admin has it. Only
users holding ``poppy_django.handle_conversations`` may use it or read its live channels.
"""
