"""`hoodie init` refuses a location inside or around another table, and non-canonical locations
(issue 23): one line on stderr naming the problem, exit 2, nothing written. No Spark."""

from __future__ import annotations

import pytest

from engine.cli import main
from tests.support.tables import tree_bytes


def init(capsys, path: str, name: str = "t") -> tuple[int, str, str]:
    code = main(["init", path, "--name", name, "--record-key", "id", "--partition-field", "city"])
    out, err = capsys.readouterr()
    return code, out, err


def test_init_refuses_nested_and_enclosing_locations(tmp_path, capsys):
    assert init(capsys, str(tmp_path / "w" / "outer"), "outer")[0] == 0
    before = tree_bytes(tmp_path)
    code, out, err = init(capsys, str(tmp_path / "w" / "outer" / "nested"))
    assert (code, out) == (2, "")
    assert err == (
        f"hoodie: error: cannot create a table at {tmp_path}/w/outer/nested: it lies inside the table at "
        f"{tmp_path}/w/outer; put it beside that table, not in its folder\n"
    )
    code, out, err = init(capsys, str(tmp_path / "w"))
    assert (code, out) == (2, "")
    assert err == (
        f"hoodie: error: cannot create a table at {tmp_path}/w: the table at {tmp_path}/w/outer lies inside it; "
        "choose a folder that holds no table\n"
    )
    assert tree_bytes(tmp_path) == before
    assert init(capsys, str(tmp_path / "w" / "beside"), "beside")[0] == 0


@pytest.mark.parametrize(
    ("location", "problem"),
    [
        ("{root}/w/../outer", "contains '..'"),
        ("{root}/w//t", "empty path segment"),
        ("file://{root}/w/t?x", "query or fragment"),
        ("file://{root}/w/t#x", "query or fragment"),
        ("file://{root}/w%2Ft", "percent-encoded separator"),
    ],
)
def test_init_refuses_non_canonical_locations(tmp_path, capsys, location, problem):
    (tmp_path / "w").mkdir()
    code, out, err = init(capsys, location.format(root=tmp_path))
    assert (code, out) == (2, "")
    assert err.startswith("hoodie: error: the table location ") and problem in err and err.count("\n") == 1
    assert list((tmp_path / "w").iterdir()) == []
