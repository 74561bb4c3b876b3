#!/usr/bin/env python3
"""django_app.py: the legacy coupon flow with the Django 3.2 ORM over mysqlclient, settings configured in code.

Variants (F()-less, as legacy code reads): save (Stock.objects.get, stock.remain -= 1, stock.save(),
Order.objects.create), update (filter().update(remain=<read - 1>)), atomic (save in transaction.atomic()).
One database alias per app instance (its sidecar's port); each attempt is one request: Django's default
CONN_MAX_AGE = 0 closes the connection when the request ends, as request_finished does.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo  # noqa: E402

import django  # noqa: E402
from django.conf import settings  # noqa: E402


def configure(args):
    databases = {"default": {"ENGINE": "django.db.backends.mysql", "HOST": args.host, "PORT": args.ports[0],
                             "NAME": args.database, "USER": args.user, "PASSWORD": args.password}}
    for i, port in enumerate(args.ports):
        databases[f"pod{i}"] = dict(databases["default"], PORT=port)
    settings.configure(DATABASES=databases, INSTALLED_APPS=[], USE_TZ=False,
                       DEFAULT_AUTO_FIELD="django.db.models.BigAutoField")
    django.setup()


class DjangoApp(zoo.App):
    name = "django"

    def __init__(self, args):
        super().__init__(args)
        if args.variant not in ("save", "update", "atomic"):
            raise SystemExit("django_app.py: --variant save|update|atomic")
        configure(args)
        from django.db import models

        class Stock(models.Model):
            campaign_id = models.BigIntegerField(primary_key=True)
            remain = models.IntegerField()
            version = models.IntegerField(default=0)

            class Meta:
                app_label = "zoo"
                db_table = "coupon_stock"
                managed = False

        class Order(models.Model):
            user_id = models.BigIntegerField()
            campaign_id = models.BigIntegerField()
            created_at = models.DateTimeField(auto_now_add=True)

            class Meta:
                app_label = "zoo"
                db_table = "coupon_order"
                managed = False

        self.Stock, self.Order = Stock, Order
        self.pods = iter(range(len(args.ports)))

    def pod(self, port):
        return f"pod{next(self.pods)}"

    def claim(self, alias, user, trace):
        k = self.args.campaign
        trace.statement = "SELECT"
        stock = self.Stock.objects.using(alias).get(campaign_id=k)
        if stock.remain <= 0:
            return zoo.Outcome.SOLD_OUT
        trace.statement = "UPDATE"
        if self.args.variant == "update":
            self.Stock.objects.using(alias).filter(campaign_id=k).update(remain=stock.remain - 1)
        else:
            stock.remain -= 1
            stock.save(using=alias)
        trace.statement = "INSERT"
        self.Order.objects.using(alias).create(user_id=user, campaign_id=k)
        return zoo.Outcome.CLAIMED

    def attempt(self, alias, user, trace):
        from django.db import close_old_connections, transaction
        try:
            if self.args.variant == "atomic":
                with transaction.atomic(using=alias):
                    return self.claim(alias, user, trace)
            return self.claim(alias, user, trace)
        finally:
            close_old_connections()   # the end of the request


if __name__ == "__main__":
    sys.exit(zoo.main(DjangoApp))
