"""The CDK app split by concern: data (tables, bucket, key, secret), api (functions, authorizer,
routes), observability (alarms, dashboard)."""
