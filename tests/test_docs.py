"""The code's citations of the design resolve: "ARCHITECTURE.md §N" names a "## N." heading
of ARCHITECTURE.md, "BENCHMARKS.md, '<heading>'" a heading of BENCHMARKS.md,
"docs/benchmarks-journal.md, '<heading>'" one of the journal's, and nothing cites the
design notes that live outside the repo."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("engine", "app", "tests", "benchmarks")

SECTION = re.compile(r"ARCHITECTURE\.md §(\d+)")
BENCHMARK = re.compile(r"BENCHMARKS\.md, '([^']+)'")
JOURNAL = re.compile(r"docs/benchmarks-journal\.md, '([^']+)'")
OUTSIDE = re.compile(r"DESIGN(\.md| §)")


def _sources() -> dict[str, str]:
    """Every .py file but this one, whose examples are broken on purpose."""
    return {str(path.relative_to(ROOT)): path.read_text(encoding="utf-8")
            for package in SOURCES for path in sorted((ROOT / package).rglob("*.py"))
            if path != Path(__file__).resolve()}


def _headings(document: str) -> list[str]:
    text = (ROOT / document).read_text(encoding="utf-8")
    return [line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")]


def architecture_sections() -> set[str]:
    return {m.group(1) for h in _headings("ARCHITECTURE.md") if (m := re.match(r"(\d+)\.", h))}


def broken_citations(sources: dict[str, str]) -> list[str]:
    sections = architecture_sections()
    benchmarks = _headings("BENCHMARKS.md")
    journal = _headings("docs/benchmarks-journal.md")
    broken = []
    for path, text in sources.items():
        broken += [f"{path}: ARCHITECTURE.md §{n}" for n in SECTION.findall(text)
                   if n not in sections]
        broken += [f"{path}: BENCHMARKS.md, '{h}'" for h in BENCHMARK.findall(text)
                   if not any(heading.startswith(h) for heading in benchmarks)]
        broken += [f"{path}: docs/benchmarks-journal.md, '{h}'" for h in JOURNAL.findall(text)
                   if not any(heading.startswith(h) for heading in journal)]
    return broken


def test_nothing_cites_the_design_notes_outside_the_repo():
    documents = {path.name: path.read_text(encoding="utf-8") for path in ROOT.glob("*.md")}
    citing = [path for path, text in {**_sources(), **documents}.items() if OUTSIDE.search(text)]
    assert citing == []


def test_every_citation_names_an_existing_section_or_heading():
    sources = _sources()
    assert any(SECTION.search(text) for text in sources.values())  # the pattern still matches
    assert broken_citations(sources) == []


def test_a_broken_citation_is_caught():
    fake = {"a.py": "see ARCHITECTURE.md §99 and BENCHMARKS.md, 'No such heading'",
            "b.py": "see ARCHITECTURE.md §3 and BENCHMARKS.md, 'Current figures'",
            "c.py": "docs/benchmarks-journal.md, 'Verify cost' and "
                    "docs/benchmarks-journal.md, 'Nowhere'"}
    assert broken_citations(fake) == ["a.py: ARCHITECTURE.md §99",
                                      "a.py: BENCHMARKS.md, 'No such heading'",
                                      "c.py: docs/benchmarks-journal.md, 'Nowhere'"]
    assert OUTSIDE.search("as in DESIGN §4") and OUTSIDE.search("see DESIGN.md section 8")


def test_every_test_file_and_test_the_documents_name_exists():
    """After tests move, the documents' "tests/....py::test_name" still point at them."""
    missing = []
    for document in ("ARCHITECTURE.md", "README.md", "BENCHMARKS.md",
                     "docs/benchmarks-journal.md"):
        text = (ROOT / document).read_text(encoding="utf-8")
        for path, name in re.findall(r"(tests/[\w/]+\.py)(?:::(\w+))?", text):
            source = ROOT / path
            if not source.exists() or (name and f"def {name}(" not in source.read_text()):
                missing.append(f"{document}: {path}{'::' + name if name else ''}")
    assert missing == []
