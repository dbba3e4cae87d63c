"""The webhook sender. It builds A2A StreamResponses, so it imports `a2a.types`, whose `a2a.utils`
package `__init__` loads Starlette, AnyIO and asyncio for the SDK's servers: registered lazily, as the
A2A function does (functions/a2a_api/__init__.py)."""

from dovecote.platform.lazy import lazy_package

lazy_package("a2a.utils")
