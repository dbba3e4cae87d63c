"""Text embeddings for the semantic tier (issue 20): the `Embedder` port and its adapters.

- `ports.py`: the port (batch in, vectors out, with the model id and the dimension stored beside every
  vector, so a change of model is seen and re-embeds) and the one input gate.
- `bedrock.py`: Amazon Bedrock, Titan Text Embeddings V2 (the cloud adapter).
- `local.py`: all-MiniLM-L6-v2 from a PyPI wheel, a numpy forward pass (the local adapter).
- `engines.py`: the one a deployment is configured with (DOVECOTE_EMBEDDER), or None.
- `fakes.py`: a deterministic hashing embedder for tests of the plumbing; it is not semantic.

A package of its own rather than a part of recall: the memory service's related and conflicting
memories are the next user of the same port.
"""
