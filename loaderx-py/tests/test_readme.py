"""Every Python example of README.md runs (each in a fresh directory)."""

import re

import pytest

from conftest import REPO

BLOCKS = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), flags=re.S)


def test_the_readme_has_python_examples():
    assert BLOCKS


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_example_runs(code, in_tmp):
    exec(compile(code, "README.md", "exec"), {"__name__": "__readme__"})
