"""The README's two newcomer commands are the ones continuous integration runs."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CI_SCRIPT = ROOT / ".ci" / "run"

COMMANDS = {
    "Install and compute a water RDF": (
        'python -m pip install ".[test]" && mdakit-fastrdf --plot rdf.png'
    ),
    "Run the tests": "python -m pytest tests",
}


def first_block_under(heading, text):
    """Return the language and body of the first fenced block after a ``##`` heading."""
    section = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert section, f"README.md has no section {heading!r}"
    block = re.search(r"^```(\w*)\n(.*?)^```", section.group(1), re.M | re.S)
    assert block, f"section {heading!r} has no fenced code block"
    return block.group(1), block.group(2).strip()


@pytest.mark.parametrize("heading", COMMANDS)
def test_readme_command(heading):
    language, body = first_block_under(heading, README.read_text(encoding="utf-8"))
    assert language == "bash"
    assert body == COMMANDS[heading]


@pytest.mark.parametrize("command", COMMANDS.values())
def test_ci_runs_readme_command(command):
    lines = [line.strip() for line in CI_SCRIPT.read_text(encoding="utf-8").splitlines()]
    assert command in lines
