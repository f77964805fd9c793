"""The README stays a short guide and the documentation's links and commands point at things that exist."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from aclm.base.paths import PROJECT_ROOT

README = PROJECT_ROOT / "README.md"
PAGES = [README, *sorted((PROJECT_ROOT / "docs").glob("*.md"))]
MAKEFILE = PROJECT_ROOT / "Makefile"
MAX_README_LINES = 130

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")          # [text](target)
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]+`")


def strip_code(text: str) -> str:
    """The text without code blocks and code spans (a `[x](y)` there is not a link)."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (not - or _), spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())   # a link in a heading keeps its text
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor the page's headings give, with GitHub's -1, -2 ... for repeated ones."""
    seen: dict[str, int] = {}
    found = set()
    for line in FENCE.sub("", page.read_text(encoding="utf-8")).splitlines():
        match = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        base = slug(match.group(1))
        n = seen.get(base, 0)
        found.add(base if n == 0 else f"{base}-{n}")
        seen[base] = n + 1
    return found


def relative_links(page: Path) -> list[str]:
    return [t for t in LINK.findall(strip_code(page.read_text(encoding="utf-8")))
            if not re.match(r"[a-z][a-z0-9+.-]*:", t)]            # http:, https:, mailto: ...


def test_readme_is_short():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; move detail to docs/"


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(PROJECT_ROOT).as_posix() for p in PAGES])
def test_relative_links_resolve(page):
    broken = []
    for target in relative_links(page):
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no file {dest.relative_to(PROJECT_ROOT) if dest.is_relative_to(PROJECT_ROOT) else dest}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading with anchor #{anchor} in {dest.name}")
    assert broken == []


def makefile_targets() -> list[re.Pattern]:
    """Each rule's target as a pattern: `run` matches itself, `reproduce-table%` any reproduce-table<stem>."""
    targets = []
    for line in MAKEFILE.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^([A-Za-z0-9_%.\-]+(?:\s+[A-Za-z0-9_%.\-]+)*)\s*:(?![=:])", line)
        if not match:
            continue
        for name in match.group(1).split():
            if name.startswith("."):
                continue
            targets.append(re.compile("^" + re.escape(name).replace("%", ".+") + "$"))
    return targets


def make_goals(text: str) -> list[str]:
    """The goals of every `make ...` command in the page's code (blocks and spans): options, VAR=value
    and `2>&1`-like words skipped."""
    code = [m.group(0) for m in FENCE.finditer(text)] + INLINE_CODE.findall(text)
    goals = []
    for chunk in code:
        for match in re.finditer(r"(?<![\w-])make((?:[ \t]+[^\s`#;&]+)+)", chunk):
            words = match.group(1).split()
            skip_value = False
            for word in words:
                if skip_value:
                    skip_value = False
                    continue
                if word in ("-j", "-C", "-f", "-l"):
                    skip_value = True
                    continue
                if word.startswith("-") or "=" in word or word.startswith(("$", "'", '"', "(", ")")):
                    continue
                if not re.fullmatch(r"[A-Za-z][\w.%|-]*", word):
                    break
                goals.extend(word.split("|"))    # `make aclm|run` names two targets
    return goals


def test_make_targets_in_the_readme_exist():
    targets = makefile_targets()
    goals = make_goals(README.read_text(encoding="utf-8"))
    assert "test" in goals and "demo" in goals      # the parser finds the README's own commands
    missing = sorted({g for g in goals if not any(t.match(g) for t in targets)})
    assert missing == [], f"README.md names make targets the Makefile lacks: {missing}"


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
def test_make_help_lists_the_main_targets():
    proc = subprocess.run(["make", "--no-print-directory", "help"], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    listed = {line.split()[0] for line in proc.stdout.splitlines() if line.strip()}
    assert {"test", "demo", "run"} <= listed, proc.stdout
