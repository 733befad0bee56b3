"""Every Python example of README.md runs (each in a fresh directory). An example that imports
Ray (`loaderx.ray`) skips where Ray is not installed, unless LOADERX_REQUIRE_RAY is set."""

import importlib.util
import os
import re

import pytest

from conftest import REPO

BLOCKS = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), flags=re.S)


def needs_ray(code):
    return re.search(r"^\s*(import ray|from loaderx\.ray import|import loaderx\.ray)", code, flags=re.M) is not None


def test_the_readme_has_python_examples():
    assert BLOCKS


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_example_runs(code, in_tmp):
    if needs_ray(code) and not os.environ.get("LOADERX_REQUIRE_RAY") and importlib.util.find_spec("ray") is None:
        pytest.skip("the example uses Ray, which is not installed")
    exec(compile(code, "README.md", "exec"), {"__name__": "__readme__"})
