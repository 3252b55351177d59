"""The README's contents list names every section heading, in order, with the anchor GitHub
gives it, and nothing else.

    python3 tests/readme_contents.py          # exit 1, with the list it should be, when stale
    python3 tests/readme_contents.py --write  # rewrite the list in place

The list sits between `## Contents` and the next `## ` heading: one item per `##` heading, its
`###` headings after a colon, joined by ` · ` and wrapped at 100 characters. Headings inside
fenced code blocks (shell comments) are not headings."""

import pathlib
import re
import sys

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"
WIDTH = 100


def headings(lines):
    fenced = False
    for line in lines:
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"^(##|###) (.+)$", line)):
            yield len(m.group(1)), m.group(2)


def anchor(title, seen):
    # GitHub's rule: lower case, drop everything but word characters, hyphens and spaces, then
    # spaces to hyphens; a repeated anchor gets -1, -2, ...
    slug = re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")
    count = seen.get(slug, 0)
    seen[slug] = count + 1
    return slug if count == 0 else f"{slug}-{count}"


def contents(lines):
    seen, sections = {}, []
    for level, title in headings(lines):
        link = f"[{title}](#{anchor(title, seen)})"
        if title == "Contents":
            continue
        if level == 2:
            sections.append((f"**{link}**", []))
        elif sections:
            sections[-1][1].append(link)
    out = []
    for top, subs in sections:
        # The item's first line holds the section and its first subsection; the rest follow,
        # each after a ` · `, on continuation lines where one would pass the width.
        line = f"- {top}" + (f": {subs[0]}" if subs else "")
        for part in subs[1:]:
            if len(line) + 3 + len(part) > WIDTH:
                out.append(line + " ·")
                line = "  " + part
            else:
                line += " · " + part
        out.append(line)
    return out


def main():
    lines = README.read_text().split("\n")
    start = lines.index("## Contents") + 2
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("## "))
    expected = contents(lines) + [""]
    if lines[start:end] == expected:
        print(f"README contents: {len(expected) - 1} lines, every heading listed")
        return 0
    if "--write" in sys.argv[1:]:
        README.write_text("\n".join(lines[:start] + expected + lines[end:]))
        print("README contents rewritten")
        return 0
    print("the README's contents list is stale (--write rewrites it); it should read:")
    print("\n".join(expected))
    return 1


if __name__ == "__main__":
    sys.exit(main())
