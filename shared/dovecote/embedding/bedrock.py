"""Amazon Bedrock, Titan Text Embeddings V2 (`bedrock-runtime` InvokeModel), as an `Embedder`.

InvokeModel embeds one text per call, so a batch is sent over a few threads (boto3 clients are
thread-safe) and answered in order. Retries are botocore's standard mode, as for every other client
(dovecote.platform.aws); what still fails after them is `Unavailable`, and nothing of the batch is
returned. Titan counts input in tokens (at most 8,192): a text it refuses as too long is cut in half,
at most three times, which keeps its start (what a message is about) rather than failing the batch.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from threading import Lock
from typing import Any

from dovecote.embedding.ports import EmbedderInfo, check_vectors, gate_texts
from dovecote.platform.errors import InvalidArgument, Unavailable

TITAN_V2 = "amazon.titan-embed-text-v2:0"
DIMENSIONS = (256, 512, 1024)  # the ones Titan V2 offers
CUTS = 3


class BedrockEmbedder:
    def __init__(self, client: Any, *, dimension: int = 512, model_id: str = TITAN_V2, threads: int = 4) -> None:
        if dimension not in DIMENSIONS:
            offered = ", ".join(map(str, DIMENSIONS))
            raise InvalidArgument(f"Titan V2 embeds in {offered} dimensions", dimension=dimension)
        self._client = client
        self._info = EmbedderInfo(model_id, dimension)
        self._threads = max(1, threads)
        self._lock = Lock()
        self.input_tokens = 0  # what Bedrock bills: the bench prices ingestion from it

    @property
    def info(self) -> EmbedderInfo:
        return self._info

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        batch = gate_texts(texts)
        if len(batch) <= 1 or self._threads == 1:
            vectors = [self._one(text) for text in batch]
        else:
            with ThreadPoolExecutor(max_workers=min(self._threads, len(batch))) as pool:
                vectors = list(pool.map(self._one, batch))
        return check_vectors(self._info, batch, vectors)

    def _one(self, text: str) -> list[float]:
        if not text.strip():
            return [0.0] * self._info.dimension
        from botocore.exceptions import BotoCoreError, ClientError

        for _ in range(CUTS + 1):
            body = {"inputText": text, "dimensions": self._info.dimension, "normalize": True}
            try:
                answer = self._client.invoke_model(
                    modelId=self._info.model_id,
                    body=json.dumps(body),
                    contentType="application/json",
                    accept="application/json",
                )
                document = json.loads(answer["body"].read())
            except ClientError as exc:
                code = exc.response.get("Error", {}).get("Code", "")
                if code == "ValidationException" and len(text) > 1:
                    text = text[: len(text) // 2]  # too many tokens: keep the start
                    continue
                raise Unavailable(f"Bedrock refused the embedding: {code}", model_id=self._info.model_id) from exc
            except (BotoCoreError, ValueError) as exc:
                raise Unavailable("Bedrock did not answer an embedding", model_id=self._info.model_id) from exc
            with self._lock:
                self.input_tokens += int(document.get("inputTextTokenCount") or 0)
            vector = document.get("embedding")
            if not isinstance(vector, list):
                raise Unavailable("Bedrock answered without an embedding", model_id=self._info.model_id)
            return vector
        raise Unavailable("Bedrock refused the text even cut to its start", model_id=self._info.model_id)


__all__ = ["DIMENSIONS", "TITAN_V2", "BedrockEmbedder"]
