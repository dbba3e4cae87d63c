"""Fuzz the task service's operations (tasks, contexts, leases, workspaces, worker events) from the
runtime's own OpenAPI document, as their owner and as the two other roles (tests/support/fuzzing.py;
the other services are fuzzed in test_schemathesis.py, on a runtime of their own)."""

from __future__ import annotations

from tests.support.fuzzing import TASK_PREFIXES, fuzz_tests

test_api_conforms_to_its_schema, test_the_other_roles_get_documented_answers = fuzz_tests(TASK_PREFIXES)
