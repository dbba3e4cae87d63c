"""The base of the PynamoDB items of a table whose every kind shares one key schema, (pk, sk): the
tasks, memory and recall tables. Declared with the placeholder table name, like every item model;
`platform.dynamo.bind` binds each kind to its configured table."""

from __future__ import annotations

from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model

from dovecote.platform.dynamo import PLACEHOLDER_TABLE


class KeyedItem(Model):
    class Meta:
        table_name = PLACEHOLDER_TABLE

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
