"""What the local runtime writes to its log from a request: text any client sent is escaped first, so
no request can end a line, forge another, or send escape sequences to the terminal reading dev.log.
The gateway's request line and the local S3's refusal line both use it."""

from __future__ import annotations


def printable(data: bytes | str) -> str:
    """Text for a log line: printable ASCII as it is, `\\` doubled, every other byte escaped
    (`\\n`, `\\r`, `\\t`, else `\\xNN`), so no input can end the line or reach the terminal."""
    raw = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data
    out = []
    for byte in raw:
        if byte == 0x5C:
            out.append("\\\\")
        elif 0x20 <= byte < 0x7F:
            out.append(chr(byte))
        else:
            out.append({0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"}.get(byte, f"\\x{byte:02x}"))
    return "".join(out)
