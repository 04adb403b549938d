"""Each agent thread's ``history`` list becomes its entry rows, in order (and back).

Its own migration: PostgreSQL refuses to alter a table in the transaction that wrote rows
referring to it, so dropping ``history`` comes after, in 0008.
"""

from django.db import migrations

BATCH = 1000


def history_to_entries(apps, schema_editor):
    AgentThread = apps.get_model('poppy_django', 'AgentThread')
    AgentThreadEntry = apps.get_model('poppy_django', 'AgentThreadEntry')
    for thread in AgentThread.objects.exclude(history=[]).order_by('pk').iterator():
        entries = [
            AgentThreadEntry(
                thread=thread,
                position=position,
                role=entry.get('role', 'system'),
                text=entry.get('text') or '',
            )
            for position, entry in enumerate(thread.history, start=1)
        ]
        AgentThreadEntry.objects.bulk_create(entries, batch_size=BATCH)
        AgentThread.objects.filter(pk=thread.pk).update(last_position=len(entries))


def entries_to_history(apps, schema_editor):
    AgentThread = apps.get_model('poppy_django', 'AgentThread')
    AgentThreadEntry = apps.get_model('poppy_django', 'AgentThreadEntry')
    for thread in AgentThread.objects.order_by('pk').iterator():
        history = [
            {'role': role, 'text': text}
            for role, text in AgentThreadEntry.objects.filter(thread=thread)
            .order_by('position')
            .values_list('role', 'text')
        ]
        AgentThread.objects.filter(pk=thread.pk).update(history=history)


class Migration(migrations.Migration):

    dependencies = [
        ('poppy_django', '0006_agent_thread_entries'),
    ]

    operations = [
        migrations.RunPython(history_to_entries, entries_to_history, elidable=True),
    ]
