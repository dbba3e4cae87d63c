"""Rebuild: re-create an authority's index from the archive, its canonical copy.

The index is derived: every transcript it holds was first archived byte for byte with its format,
project and SHA-256, and every topic label was archived too. A rebuild clears the authority in the
index, then parses and replaces each archived transcript and re-applies the labels whose start
message still exists. Searches during a rebuild see a partial index (local engines only rebuild on
request; a cloud rebuild would target a fresh index and switch an alias).

Cost: one archive listing per 1,000 transcripts, one GET per transcript (body and metadata together),
one replace per session, one listing of topics and one GET per label.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from dovecote.platform.errors import DomainError
from dovecote.recall import formats
from dovecote.recall.model import IngestRequest, gate_ingest
from dovecote.recall.ports import ArchiveEntry, SearchIndex, TranscriptArchive


@dataclass
class RebuildReport:
    transcripts: int = 0
    sessions: int = 0
    messages: int = 0
    topics: int = 0
    failed: list[dict[str, str]] = field(default_factory=list)


def request_from_archive(entry: ArchiveEntry, body: bytes) -> IngestRequest:
    if entry.format == "generic":
        return gate_ingest(json.loads(body.decode("utf-8")))
    return IngestRequest(format=entry.format, project=entry.project, project_folder=entry.project_folder, jsonl=body)


def rebuild_authority(index: SearchIndex, archive: TranscriptArchive, authority: str) -> RebuildReport:
    report = RebuildReport()
    index.delete_authority(authority)
    for key in archive.keys(authority):
        report.transcripts += 1
        try:
            body, entry = archive.get(authority, key)
            parsed = formats.parse(request_from_archive(entry, body))
        except (DomainError, ValueError) as exc:
            report.failed.append({"key": key, "error": str(exc)[:200]})
            continue
        for session in parsed.sessions:
            index.replace_session(authority, session, sha256=entry.sha256)
            report.sessions += 1
            report.messages += len(session.messages)
    for topic in archive.topics(authority):
        if index.message(authority, topic.session_id, topic.start_uuid) is not None:
            index.add_topic(authority, topic.session_id, topic.start_uuid, topic.label)
            report.topics += 1
    return report
