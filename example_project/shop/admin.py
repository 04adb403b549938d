from django.contrib import admin

from example_project.shop.models import Order


@admin.register(Order)
class OrderAdmin(admin.ModelAdmin):
    list_display = ["id", "account_id", "item", "status"]
    list_filter = ["status"]
    search_fields = ["id", "account_id"]
