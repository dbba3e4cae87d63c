"""The A2A function. `a2a.types` imports `a2a.utils.errors`, and the `a2a.utils` package's `__init__`
imports its protobuf helpers, which load Starlette, AnyIO and asyncio for the SDK's servers (a
quarter of this function's cold start): registered lazily (dovecote.platform.lazy), only the
modules imported by name load."""

from dovecote.platform.lazy import lazy_package

lazy_package("a2a.utils")
