"""Sections of docs/BENCHMARKS.md: find one by its title, write one in place.

report.py regenerates the page and keeps the sections other runners write
(w9_run.py, mpi/mpi_run.py); those runners replace their own section here.
"""
import os


def span(lines, title):
    """(start, end) of the section whose heading line is `title` (up to the
    next "## " heading or the end), or None."""
    start = next((i for i, l in enumerate(lines) if l.strip() == title), None)
    if start is None:
        return None
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")),
               len(lines))
    return start, end


def put(path, title, lines, before=()):
    """Write `lines` (starting with `title`) as that section of the page at
    `path`: in place of the old one, else before the first of the headings
    `before` the page has, else at the end. Returns path."""
    text = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
    body = text.split("\n")
    old = span(body, title)
    if old is not None:
        body = body[:old[0]] + lines + body[old[1]:]
    else:
        at = next((i for i, l in enumerate(body) if l.strip() in before), None)
        if at is None:
            body = body + ([""] if body and body[-1].strip() else []) + lines
        else:
            body = body[:at] + lines + [""] + body[at:]
    out = "\n".join(body)
    with open(path, "w") as f:
        f.write(out if out.endswith("\n") else out + "\n")
    return path
