"""The Lambda functions. Importing a handler imports this package first: Powertools' event_handler
package is registered lazily here (dovecote.platform.lazy), so an API function loads the API Gateway
resolver it uses and not every other resolver the package re-exports (measured in bench/coldstart.py)."""

from dovecote.platform.lazy import lazy_package

lazy_package("aws_lambda_powertools.event_handler")
