"""The Lambda functions. Importing a handler imports this package first: Powertools' event_handler
package is registered lazily here (dovecote.platform.lazy), so an API function loads the API Gateway
resolver it uses and not every other resolver the package re-exports (measured in bench/coldstart.py).
The same for Powertools' event data classes: the resolver takes seven of them from the package, whose
`__init__` imports all of its ~35 event modules (Kafka, SES, CodePipeline, ...).

First of all, in Lambda, the cyclic garbage collector is paused until the first invocation ends
(dovecote.platform.gc_pause: about 8% of a cold start)."""

from dovecote.platform import gc_pause

gc_pause.pause()

from dovecote.platform.lazy import lazy_package  # noqa: E402 - after the pause, which is the point

lazy_package("aws_lambda_powertools.event_handler")
lazy_package("aws_lambda_powertools.utilities.data_classes")
