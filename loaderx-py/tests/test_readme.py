"""Every Python example of README.md and of the user guide (docs/guide/src) runs, each in a
fresh directory. An example that imports Ray (`loaderx.ray`) skips where Ray is not installed,
unless LOADERX_REQUIRE_RAY is set."""

import importlib.util
import os
import re

import pytest

from conftest import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs" / "guide" / "src").glob("*.md"))]
EXAMPLES = [
    (page.relative_to(REPO).as_posix(), code)
    for page in PAGES
    for code in re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)
]
BLOCKS = [code for _, code in EXAMPLES]


def needs_ray(code):
    return re.search(r"^\s*(import ray|from loaderx\.ray import|import loaderx\.ray)", code, flags=re.M) is not None


def test_the_readme_has_python_examples():
    assert BLOCKS


def test_the_guide_has_python_examples():
    assert any(page != "README.md" for page, _ in EXAMPLES)


@pytest.mark.parametrize(
    ("page", "code"), EXAMPLES, ids=[f"{page.rsplit('/', 1)[-1]}-block{i}" for i, (page, _) in enumerate(EXAMPLES)]
)
def test_readme_example_runs(page, code, in_tmp):
    if needs_ray(code) and not os.environ.get("LOADERX_REQUIRE_RAY") and importlib.util.find_spec("ray") is None:
        pytest.skip("the example uses Ray, which is not installed")
    exec(compile(code, page, "exec"), {"__name__": "__readme__"})
