"""Documentation examples run and documentation links resolve: the docstring examples, the Python
blocks of README.md and docs/, and every relative link in README.md, docs/**/*.md and
benchmarks/README.md (a file that exists; for a `#anchor` into a Markdown file, one of its
headings)."""

from __future__ import annotations

import doctest
import pathlib
import re

import pytest

import secure_fedgraph.protocol.sum_backends as secure_sum

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", flags=re.M | re.S)
_CODE_SPAN = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", flags=re.M)


def _prose(text: str) -> str:
    """The text without fenced blocks and code spans, where brackets are not links."""
    return _CODE_SPAN.sub("", _FENCE.sub("", text))


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(path: pathlib.Path) -> set[str]:
    """The anchors of a Markdown file's headings, repeated ones numbered as GitHub numbers them."""
    seen: dict[str, int] = {}
    out = set()
    for heading in _HEADING.findall(_FENCE.sub("", path.read_text())):
        slug = _slug(heading)
        out.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return out


def relative_links(path: pathlib.Path) -> list[str]:
    """The link and image targets of a Markdown file that are not URLs."""
    return [t for t in _LINK.findall(_prose(path.read_text())) if not re.match(r"[a-z][a-z0-9+.-]*:", t, flags=re.I)]


def test_docstring_examples():
    result = doctest.testmod(secure_sum, raise_on_error=False)
    assert result.attempted > 0 and result.failed == 0


def test_readme_python_blocks_run(capsys):
    blocks = [(path, block) for path in DOCS
              for block in re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)]
    assert any(path.name == "README.md" and path.parent == ROOT for path, _ in blocks)
    for path, block in blocks:
        exec(compile(block, str(path.relative_to(ROOT)), "exec"), {})
    out = capsys.readouterr().out
    assert "[0, 1, 2, 4, 5, 6, 7, 8, 9]" in out  # client 3 dropped and the sums went on
    assert "(64, 32)" in out


def test_slugs_are_githubs():
    assert _slug("Accuracy against privacy budget: `sweep`") == "accuracy-against-privacy-budget-sweep"
    assert _slug("1,000 clients over gRPC (load)") == "1000-clients-over-grpc-load"
    assert _slug("CNFGNN's Graph Network, one batch") == "cnfgnns-graph-network-one-batch"
    assert _slug("`server` options") == "server-options"
    assert _slug("Running secure_fedgraph") == "running-secure_fedgraph"


def test_link_finder_sees_links_and_skips_code():
    text = "[a](x.md) ![b](img/p.png) `[c](no.md)` [d](https://e.org) [e](#here)\n```\n[f](no2.md)\n```\n"
    found = _LINK.findall(_prose(text))
    assert found == ["x.md", "img/p.png", "https://e.org", "#here"]


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path):
    assert path.exists()
    broken = []
    for target in relative_links(path):
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            broken.append(f"{target}: no file {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading with anchor #{anchor} in {dest.relative_to(ROOT)}")
    assert not broken, f"{path.relative_to(ROOT)}: broken links:\n  " + "\n  ".join(broken)


def test_readme_links_every_docs_page():
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in relative_links(ROOT / "README.md") if t.partition("#")[0]}
    pages = {p.resolve() for p in DOCS[1:]}
    assert not pages - linked, f"README.md does not link {sorted(str(p.relative_to(ROOT)) for p in pages - linked)}"
