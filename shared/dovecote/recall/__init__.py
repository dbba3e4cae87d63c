"""Recall: search past conversation transcripts for ranked refs, read bounded excerpts around a ref,
outline a session, find topics. Every answer says how complete it is (docs/design/recall.md).

Layout: `model.py` (types, constants, the ref grammar, one gate per input), `query.py` (the query
language), `formats.py` (transcript parsers), `ranking.py` (hits → one per conversation),
`ports.py` (SearchIndex, TranscriptArchive, IngestLedger), `sqlite.py` (the embedded engine),
`memory.py` (in-memory archive and ledger), `archive.py` (S3), `records.py` + `dynamo.py` (the
ledger on DynamoDB), `service.py` (the verbs), `rebuild.py` (re-index an authority from the archive).
"""
