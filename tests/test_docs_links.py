"""The README stays a short manual and the docs stay linked: pure file reading, no imports of the package.

Fails on:
- a README longer than README_MAX_LINES, or one whose first code block is not the two set-up commands
  (`make demo`, `make test`: CI runs the README's test command);
- a page under docs/ that the README does not link;
- a relative markdown link in README.md, docs/*.md, BENCHMARKS.md or benchmarks/measured/README.md to a missing
  file or a missing heading anchor (GitHub's slugs);
- a reference to a section by name, `README 'Name'`, `README, "Name"`, `README section Name`, or the same with a
  docs page (`docs/checkpoints.md, "The checkpoint race"`), in src/, conf/, docs/, README.md or scripts/, that
  names no heading of that file;
- a name the docs renamed (`analysis.stats`, ...) left in the README, docs, conf, src or pyproject.toml.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"
README_MAX_LINES = 250

LINKED_FILES = [README, REPO / "BENCHMARKS.md", REPO / "benchmarks" / "measured" / "README.md",
                *sorted(DOCS.glob("*.md"))]
REFERENCE_ROOTS = ["src", "conf", "docs", "scripts"]
REFERENCE_SUFFIXES = {".py", ".yaml", ".yml", ".md"}

# Old names: the modules and sections they name are gone (renamed or moved).
RENAMED = ["analysis.stats", "legacy.upgrade_saved_config", "The GPU cycle"]
RENAMED_ROOTS = ["src", "conf", "docs"]

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
INLINE_CODE = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.S)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def without_code(text: str) -> str:
    """The text with fenced blocks blanked (lines kept) and inline code removed: links in code are not links."""
    text = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return INLINE_CODE.sub("", text)


def headings(path: Path) -> list[str]:
    """The text of every ATX heading outside code blocks, as written (markdown kept)."""
    lines = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), path.read_text(encoding="utf-8")).splitlines()
    return [m.group(2) for line in lines if (m := HEADING.match(line))]


def plain(heading: str) -> str:
    """A heading as GitHub renders its text: links by their text, code and emphasis marks dropped."""
    heading = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    heading = re.sub(r"<[^>]+>", "", heading)
    return heading.replace("`", "").replace("**", "").strip()


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but '-' and '_' dropped, spaces to '-'."""
    text = unicodedata.normalize("NFC", plain(heading)).lower()
    text = "".join(ch for ch in text if ch in " -_" or unicodedata.category(ch)[0] in "LNM")
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a markdown file, with GitHub's -1, -2 suffixes for repeated headings."""
    seen: dict[str, int] = {}
    out = set()
    for heading in headings(path):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def relative_links(path: Path) -> list[tuple[int, str]]:
    """(line, target) of every relative link of a markdown file, outside code."""
    text = without_code(path.read_text(encoding="utf-8"))
    out = []
    for m in LINK.finditer(text):
        target = m.group(1)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("//"):
            continue  # http:, https:, mailto: ...
        out.append((text.count("\n", 0, m.start()) + 1, target))
    return out


def rel(path: Path, root: Path = REPO) -> str:
    return str(path.relative_to(root))


def link_problems(path: Path, root: Path = REPO) -> list[str]:
    problems = []
    for line, target in relative_links(path):
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        where = f"{rel(path, root)}:{line}: ({target})"
        if not dest.exists():
            problems.append(f"{where} points to a missing file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            problems.append(f"{where} names no heading of {rel(dest, root)}")
    return problems


def test_readme_is_short():
    n = len(README.read_text(encoding="utf-8").splitlines())
    assert n <= README_MAX_LINES, (
        f"README.md has {n} lines (at most {README_MAX_LINES}): move a feature's text to its page under docs/ "
        "and leave a short section with a link")


def test_readme_leads_with_the_two_setup_commands():
    """CI runs the README's test command; the first code block holds exactly `make demo` and `make test`."""
    block = re.search(r"^```[^\n]*\n(.*?)^```", README.read_text(encoding="utf-8"), re.M | re.S)
    assert block, "README.md has no code block"
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.split("#")[0].strip()]
    assert commands == ["make demo", "make test"], commands
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    for target in ("demo", "test"):
        assert re.search(rf"^{target}:", makefile, re.M), f"the Makefile has no '{target}' target"


def test_every_docs_page_is_linked_from_the_readme():
    linked = set()
    for _, target in relative_links(README):
        file_part = target.partition("#")[0]
        if file_part:
            linked.add((README.parent / file_part).resolve())
    missing = [rel(p) for p in sorted(DOCS.glob("*.md")) if p.resolve() not in linked]
    assert not missing, f"docs pages the README does not link: {missing}"


@pytest.mark.parametrize("path", LINKED_FILES, ids=rel)
def test_relative_links_resolve(path):
    problems = link_problems(path)
    assert not problems, "\n".join(problems)


# README 'Name', README, "Name", README's "Name", README section "Name", docs/x.md, "Name", docs/x.md "Name"
_FILE = r"(README(?:\.md)?|docs/[\w.-]+\.md)(?:'s)?,?"
QUOTED_REF = re.compile(_FILE + r"[ \t]*(?:\n[ \t]*[#*]?[ \t]*)?(?:sections?[ \t]+)?"
                        r"(?:'([^'\n]{2,})'|\"([^\"\n]{2,})\"|\u201c([^\u201d\n]{2,})\u201d)")
# README section Name (unquoted: the words up to punctuation or the line's end)
BARE_REF = re.compile(_FILE + r"[ \t]+sections?[ \t]+([A-Z][^.,;:()'\"\n]*)")


def references_in(text: str) -> list[tuple[int, str, str]]:
    """(line, file named, section name) of every reference to a named section, in the order they appear."""
    found = [(m.start(), m.group(1), next(g for g in m.groups()[1:] if g)) for m in QUOTED_REF.finditer(text)]
    found += [(m.start(), m.group(1), m.group(2)) for m in BARE_REF.finditer(text)]
    return [(text.count("\n", 0, start) + 1, named, section.strip()) for start, named, section in sorted(found)]


def norm(name: str) -> str:
    return re.sub(r"\s+", " ", plain(name)).strip().lower()


def names_a_heading(name: str, heads: list[str]) -> bool:
    """A heading is named by its text, or by its first words (a prefix ending at a word boundary)."""
    name = norm(name)
    for head in map(norm, heads):
        if head == name or (head.startswith(name) and not head[len(name)].isalnum()):
            return True
    return False


def reference_files() -> list[Path]:
    files = [README]
    for root in REFERENCE_ROOTS:
        files += [p for p in (REPO / root).rglob("*") if p.suffix in REFERENCE_SUFFIXES and p.is_file()
                  and ".egg-info" not in str(p) and "__pycache__" not in p.parts]
    return sorted(set(files))


def test_section_references_name_existing_headings():
    problems = []
    cache: dict[Path, list[str]] = {}
    for path in reference_files():
        for line, named, section in references_in(path.read_text(encoding="utf-8", errors="replace")):
            target = README if named.startswith("README") else REPO / named
            if not target.exists():
                problems.append(f"{rel(path)}:{line}: {named} does not exist")
                continue
            heads = cache.setdefault(target, headings(target))
            if not names_a_heading(section, heads):
                problems.append(f"{rel(path)}:{line}: {named} has no section {section!r}")
    assert not problems, "\n".join(problems)


def test_renamed_names_are_gone():
    files = [README, REPO / "pyproject.toml", *[p for root in RENAMED_ROOTS for p in (REPO / root).rglob("*")
                       if p.suffix in REFERENCE_SUFFIXES and p.is_file() and ".egg-info" not in str(p)]]
    hits = [f"{rel(p)}: {old!r}" for p in files for old in RENAMED
            if old in p.read_text(encoding="utf-8", errors="replace")]
    assert not hits, "old names left:\n" + "\n".join(hits)


# --- the checker itself ------------------------------------------------------------------------------------

def test_slug_is_githubs():
    assert slug("Racing: seeds where decisions are still open (`hydra/sweeper=race`)") == \
        "racing-seeds-where-decisions-are-still-open-hydrasweeperrace"
    assert slug("Samples per problem: `eval.n_samples=auto`") == "samples-per-problem-evaln_samplesauto"
    assert slug("Determinism and CPUs (issue 22, 5), 2026-12-01") == "determinism-and-cpus-issue-22-5-2026-12-01"
    assert slug("Current figures (2026-12-05)") == "current-figures-2026-12-05"
    assert slug("May a faster evaluator replace the exact one?") == "may-a-faster-evaluator-replace-the-exact-one"


def test_checker_finds_broken_links_and_references(tmp_path):
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other\n\n## A section\n", encoding="utf-8")
    page.write_text("# Page\n\n[ok](other.md#a-section) [gone](missing.md) [no anchor](other.md#nope)\n"
                    "[self](#page) `[in code](missing2.md)`\n```\n[fenced](missing3.md)\n```\n"
                    "[web](https://example.com/x)\n", encoding="utf-8")
    problems = link_problems(page, root=tmp_path)
    assert len(problems) == 2 and "missing.md" in problems[0] and "#nope" in problems[1], problems
    refs = [s for _, _, s in references_in("see README 'Quickstart', README, \"Status\" and\n"
                                           "(docs/checkpoints.md, \"The checkpoint race\"), "
                                           "README section How it works, README's \"The step's parts\".")]
    assert refs == ["Quickstart", "Status", "The checkpoint race", "How it works", "The step's parts"], refs
    assert names_a_heading("Confirm the winner", ["Confirm the winner on fresh seeds (`make confirm`)"])
    assert not names_a_heading("Confirm the", ["Confirmation"])
    assert not names_a_heading("The GPU", ["The GPUs"])

