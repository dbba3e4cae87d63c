"""The web console's security headers, defined once: `dovecote dev` sends them with every file under
/console/ (infra/local/console.py) and CloudFront's response headers policy with every file of the
console's bucket (infra/constructs/console.py).

Everything an agent wrote is data to the console, never markup, and the policy makes that hold even
if a bug let some through: scripts only from the console's own origin (no inline script, no eval, no
inline handler attribute), no plugin or frame, no framing of the console by another page
(`frame-ancestors 'none'`), the API as the one other origin it may talk to, no form posting
anywhere, and Trusted Types required for the DOM's script sinks (so an `innerHTML` assignment
throws instead of parsing). The console is the only client that needs the headers: the API answers
JSON, which a browser never renders as a page.
"""

from __future__ import annotations

PREFIX = "/console/"
# The app's static files: served with these types only (anything else is not served).
TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".svg": "image/svg+xml",
}


def content_security_policy(api_origin: str = "") -> str:
    """The CSP; `api_origin` the API's origin when it is not the console's own (the cloud)."""
    connect = "'self'" + (f" {api_origin}" if api_origin else "")
    return "; ".join(
        (
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self'",
            "img-src 'self' data:",
            f"connect-src {connect}",
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors 'none'",
            "object-src 'none'",
            "require-trusted-types-for 'script'",
            "trusted-types 'none'",
        )
    )


def security_headers(api_origin: str = "") -> dict[str, str]:
    """Every header the console's files are served with, besides Content-Type and caching."""
    return {
        "Content-Security-Policy": content_security_policy(api_origin),
        "X-Content-Type-Options": "nosniff",
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "no-referrer",
        "Cross-Origin-Opener-Policy": "same-origin",
        "Cross-Origin-Resource-Policy": "same-origin",
        "Permissions-Policy": "camera=(), microphone=(), geolocation=(), payment=(), usb=()",
    }


def cache_control(name: str) -> str:
    """Hashed assets (`app-<hash>.js`) for a year; the page and its config are always re-checked."""
    return "public, max-age=31536000, immutable" if name.startswith("app-") else "no-cache"
