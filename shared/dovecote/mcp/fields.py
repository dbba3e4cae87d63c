"""The tools' typed parameters, named like the HTTP API's fields (docs/reference/http-api.md), each with the one
sentence a model reads in the tool's JSON schema. Shared so `task_id` means the same everywhere."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

# Notes.
Key = Annotated[str, Field(description="The note's key (a project, topic or task you group notes under).")]
Run = Annotated[int, Field(ge=0, description="The run number under the key (e.g. 1 for the first attempt).")]
Name = Annotated[str, Field(description="The note's name within key and run (e.g. 'plan.md').")]
Author = Annotated[
    str, Field(description="The author's agent id; '' (the default) is the shared scope every agent reads.")
]
Ref = Annotated[
    str | None,
    Field(description="The note's ref (64 hex characters, from put or list). Give either ref or key+run+name."),
]
# Paging.
Limit = Annotated[int | None, Field(ge=0, le=1000, description="Items per page (server default when absent).")]
Cursor = Annotated[str | None, Field(description="The `cursor` of the previous page; absent for the first page.")]
After = Annotated[int, Field(ge=0, description="Return items after this sequence number (the previous page's `next`).")]
# Tasks.
TaskId = Annotated[str, Field(description="The task's id.")]
MessageId = Annotated[str, Field(description="A message's id (a message page's `id`, or an event's `message`).")]
NewTaskId = Annotated[
    str | None, Field(description="The new task's id (letters, digits, '.', '_', '-'); generated when absent.")
]
Workspace = Annotated[str, Field(description="The workspace the task's artifact applies to.")]
Context = Annotated[str, Field(description="The conversation the task belongs to (tasks of one context are related).")]
ExpectedRevision = Annotated[
    int,
    Field(
        ge=0,
        description="The task revision you last saw (from get or the previous command); a different current "
        "revision fails with revision_conflict (details: expected, actual): read the task and decide again.",
    ),
]
Fence = Annotated[int, Field(ge=0, description="The fence of your lease (from tasks_claim).")]
Text = Annotated[str, Field(description="The message, as plain text.")]
CommandId = Annotated[
    str | None,
    Field(
        description="The command's id; generated when absent and returned. Pass the same id again to retry "
        "safely: the API replays the original answer instead of running the command twice."
    ),
]
# Recall.
Q = Annotated[str, Field(description="What to look for: words or a phrase, as in a search box.")]
RecallRef = Annotated[str, Field(description="A `read_ref` from recall_search (or a prefix of one).")]
Session = Annotated[str, Field(description="A session id (or a prefix of 8+ characters) from a search result.")]
Project = Annotated[str, Field(description="Only this project (a name from results); '' for all.")]
# Memory.
Scope = Annotated[str, Field(description="The memory scope (e.g. 'project:dovecote' or 'team:infra').")]
WriteId = Annotated[str, Field(description="The memory write's id (from memory_submit).")]
