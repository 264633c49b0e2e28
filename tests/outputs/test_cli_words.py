"""Errors reached from the command line name its flags, not Python (issue 38, item 5)."""

import pytest
from MDAnalysisTests.datafiles import TPR, XTC

from mdakit_fastrdf.cli import main
from mdakit_fastrdf.cli.common import cli_message


def test_sq_names_the_atoms_without_elements_and_the_select_fix(tmp_path, capsys):
    """The adk water's virtual site MW has no element even after --guess-elements."""
    out = tmp_path / "sq.csv"
    assert main(["sq", TPR, XTC, "--select", "resname SOL", "--weights", "xray",
                 "--guess-elements", "--stop", "1", "--no-progress", "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "names lacking elements: 'MW' x11084" in err
    assert '--select "resname SOL and not name MW"' in err
    assert "guess_TopologyAttrs" not in err and "add_TopologyAttr" not in err


def test_debye_names_ignore_box(tmp_path, capsys):
    out = tmp_path / "d.csv"
    assert main(["debye", TPR, XTC, "--select", "protein", "--stop", "1", "--no-progress",
                 "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "--ignore-box" in err and "ignore_box" not in err


@pytest.mark.parametrize("python, cli", [
    ("Pass ignore_box=True to use", "Add --ignore-box to use"),
    ("or pass unwrap=False if the", "or pass --no-unwrap if the"),
    ("norm='density' and exclusion_block=(1, 1)", "--norm density and --exclusion-block 1 1"),
    ("Guess them (u.guess_TopologyAttrs(to_guess=['elements'])), or",
     "Guess them (--guess-elements), or"),
])
def test_cli_message_table(python, cli):
    assert cli_message(python, {"ignore_box": "--ignore-box"}) == cli
