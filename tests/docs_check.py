"""Holds the README and docs/ together (python3, stdlib only).

    python3 tests/docs_check.py

Checks that the README stays under 15 KB; that it links every page under docs/ (its
documentation map); and that every relative link in the README and the docs reaches a file that
exists and, when it names an anchor, a heading of that file (GitHub's anchor rule; headings in
fenced code blocks do not count). Exit status 0 when all of that holds."""

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
README_LIMIT = 15 * 1024


def anchors(path):
    fenced, seen, out = False, {}, set()
    for line in path.read_text().split("\n"):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"^#+ (.+)$", line)):
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            out.add(slug if count == 0 else f"{slug}-{count}")
    return out


def links(path):
    fenced = False
    for number, line in enumerate(path.read_text().split("\n"), 1):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            for target in re.findall(r"\]\(([^)\s]+)\)", re.sub(r"`[^`]*`", "", line)):
                if not re.match(r"^[a-z]+:", target):
                    yield number, target


def main():
    problems = []
    readme = ROOT / "README.md"
    size = len(readme.read_bytes())
    if size > README_LIMIT:
        problems.append(f"README.md is {size} bytes, over {README_LIMIT}")
    pages = sorted(ROOT.glob("docs/**/*.md"))
    linked = set()
    for page in [readme, *pages]:
        for number, target in links(page):
            file, _, anchor = target.partition("#")
            resolved = (page.parent / file).resolve() if file else page
            where = f"{page.relative_to(ROOT)}:{number}: {target}"
            if not resolved.exists():
                problems.append(f"{where}: no such file")
            elif anchor and (resolved.suffix != ".md" or anchor not in anchors(resolved)):
                problems.append(f"{where}: no such heading")
            elif page == readme:
                linked.add(resolved)
    for page in pages:
        if page not in linked:
            problems.append(f"README.md does not link {page.relative_to(ROOT)}")
    if problems:
        print("\n".join(problems))
        return 1
    print(f"docs: README {size} bytes; {len(pages)} pages, every one in the README's map, every link resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
