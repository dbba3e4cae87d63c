"""The embedder a deployment is configured with (`DOVECOTE_EMBEDDER`), or None: the tier is off."""

from __future__ import annotations

from dovecote.embedding.ports import Embedder
from dovecote.platform.settings import Settings


def open_embedder(settings: Settings) -> Embedder | None:
    if settings.embedder == "bedrock":
        from dovecote.embedding.bedrock import BedrockEmbedder
        from dovecote.platform import aws

        return BedrockEmbedder(aws.client("bedrock-runtime"), dimension=settings.embed_dimension)
    if settings.embedder == "local":
        from dovecote.embedding.local import LocalEmbedder

        return LocalEmbedder()
    if settings.embedder == "hashing":
        from dovecote.embedding.fakes import HashingEmbedder

        return HashingEmbedder(dimension=settings.embed_dimension)
    return None


__all__ = ["open_embedder"]
