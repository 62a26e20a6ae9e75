"""Documentation examples run: the docstring examples and the README's Python blocks."""

from __future__ import annotations

import doctest
import pathlib
import re

import secure_fedgraph.protocol.secure_sum as secure_sum

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_docstring_examples():
    result = doctest.testmod(secure_sum, raise_on_error=False)
    assert result.attempted > 0 and result.failed == 0


def test_readme_python_blocks_run(capsys):
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "[0, 1, 2, 4, 5, 6, 7, 8, 9]" in out  # client 3 dropped and the sums went on
    assert "(64, 32)" in out
