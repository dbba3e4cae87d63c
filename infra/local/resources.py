"""Create the AWS resources the service needs, against whatever endpoint boto3 points at (moto
locally). Table schemas come from the PynamoDB models (`TableDef`s), the same source CDK uses."""

from __future__ import annotations

import secrets
from typing import Any

from infra import constants as c


def model_tables() -> list[Any]:
    """Every table whose items are PynamoDB models: the schema comes from the models."""
    from dovecote.admin.records import TOKENS_TABLE
    from dovecote.notes.records import NOTES_TABLE
    from dovecote.tasks.records import TASKS_TABLE

    return [TOKENS_TABLE, NOTES_TABLE, TASKS_TABLE]


def create_all(*, dynamodb: Any, s3: Any, secretsmanager: Any | None, names: dict[str, str]) -> dict[str, str]:
    """Create tables, the versioned bucket and the cursor secret. Returns settings env values."""
    for table in model_tables():
        dynamodb.create_table(**table.create_table_kwargs(names[table.setting]))
    s3.create_bucket(Bucket=names["bucket"])
    s3.put_bucket_versioning(Bucket=names["bucket"], VersioningConfiguration={"Status": "Enabled"})
    env = {
        c.ENV_NOTES_TABLE: names["notes_table"],
        c.ENV_TOKENS_TABLE: names["tokens_table"],
        c.ENV_BUCKET: names["bucket"],
        c.ENV_TASKS_TABLE: names["tasks_table"],
    }
    if secretsmanager is not None:
        arn = secretsmanager.create_secret(Name="dovecote/cursor-key", SecretString=secrets.token_urlsafe(48))["ARN"]
        env[c.ENV_CURSOR_SECRET_ARN] = arn
    return env


DEFAULT_NAMES = {
    "notes_table": "dovecote-notes",
    "tokens_table": "dovecote-tokens",
    "tasks_table": "dovecote-tasks",
    "bucket": "dovecote-bodies",
}
