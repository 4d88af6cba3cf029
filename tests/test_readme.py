"""The README's Python examples run as written, and the user documentation stays what it
promises: short, current, linked, and free of development history."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
#: Words that narrate how the project was developed rather than what it does.
HISTORY = re.compile(r"\bsessions?\b|\btwins?\b|\.\./shared|\b(?:thirteenth|fourteenth)\b"
                     r"|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b", re.I)  # the last: commit hashes


DOC_BLOCKS = [(path.name, k, block) for path in DOCS
              for k, block in enumerate(re.findall(r"```python\n(.*?)```", path.read_text(), re.S))]


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index, capsys):
    exec(compile(BLOCKS[index], f"README.md example {index + 1}", "exec"), {})


@pytest.mark.parametrize("name, index, block", DOC_BLOCKS, ids=[f"{n}-{k}" for n, k, _ in DOC_BLOCKS])
def test_docs_examples_run(name, index, block, capsys):
    exec(compile(block, f"docs/{name} example {index + 1}", "exec"), {})


def test_readme_is_short_and_keeps_the_quick_start():
    text = README.read_text()
    assert len(text.split()) <= 1500
    assert "python3 -m pip install -e . && python3 -m sparsegpu.demo" in text
    assert 'python3 -m pip install -e ".[test]" && python3 -m pytest -q' in text
    assert len(BLOCKS) >= 5


def test_readme_names_every_install_extra():
    section = (ROOT / "pyproject.toml").read_text().split("[project.optional-dependencies]")[1].split("\n[")[0]
    extras = re.findall(r"^([\w-]+) = \[", section, re.M)
    assert {"cuda12", "cuda13", "test", "bench", "plot"} <= set(extras)
    text = README.read_text()
    for extra in extras:
        assert f"`{extra}`" in text or f".[{extra}]" in text, extra


@pytest.mark.parametrize("path", [README, *DOCS], ids=lambda p: p.name)
def test_user_documents_tell_no_development_history(path):
    found = HISTORY.findall(path.read_text())
    assert not found, f"{path.name}: {found}"


@pytest.mark.parametrize("path", [README, *DOCS, ROOT / "asv_benchmarks" / "README.md"], ids=lambda p: p.name)
def test_relative_links_resolve(path):
    for target in re.findall(r"\]\(([^)#]+)\)", path.read_text()):
        if "://" not in target:
            assert (path.parent / target).exists(), f"{path.name} links to missing {target}"


def test_docs_hold_the_three_pages_and_every_table_is_dated():
    assert {p.name for p in DOCS} >= {"performance.md", "architecture.md", "adding-a-format.md"}
    sections = re.split(r"\n## ", (ROOT / "docs" / "performance.md").read_text())[1:]
    assert len(sections) >= 6
    for section in sections:
        assert re.search(r"20\d\d-\d\d-\d\d", section), section.splitlines()[0]
        machine = any(gpu in section for gpu in ("H200", "H100")) or "without a GPU" in section  # or the CPU host
        assert machine and "python3 " in section, section.splitlines()[0]
