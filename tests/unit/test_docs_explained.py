"""Values a reader meets in an example are explained where they appear (issue 29): the manual's
`--expected-base-revision rev-0` (docs/services/artifacts.md) and the echo worker's `empty` base revision, and the CLI's
help for
the option says what to give."""

from __future__ import annotations

from typer.testing import CliRunner

from dovecote.cli import app
from tests.conftest import ROOT


def test_rev_0_and_empty_are_explained_beside_their_use() -> None:
    readme = (ROOT / "docs" / "services" / "artifacts.md").read_text()
    used = readme.index("--expected-base-revision rev-0")
    after = readme[used : used + 3000]
    assert "**`rev-0` and `empty` are base revisions of a workspace with no head yet.**" in after
    assert "`empty` in `examples/echo_worker.py`" in after and "`confirmed_revision`" in after
    worker = (ROOT / "examples" / "echo_worker.py").read_text()
    comment = worker[: worker.index('EMPTY_REVISION = "empty"')].rsplit("\n\n", 1)[-1]
    assert "no head yet" in comment and "any" in comment


def test_the_option_help_says_what_to_give() -> None:
    shown = CliRunner().invoke(app, ["worker", "freeze-artifact", "--help"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0
    text = " ".join(shown.output.split())
    assert "the head's confirmed_revision" in text and "first freeze names any revision" in text
