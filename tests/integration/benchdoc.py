"""Writes a benchmark script's results into docs/BENCHMARKS.md between its own markers.

Each benchmark owns the block between a begin and an end marker; running it again replaces only that
block, so one document holds every benchmark's latest run."""

import os


def write_block(path, block, begin_marker, end_marker, section_title=None):
    """Replaces the text between the markers with block (which starts with begin_marker and ends with
    end_marker). Without the markers the block goes under section_title when the document has that
    heading, else at the end of the document (created when missing)."""
    text = ""
    if os.path.exists(path):
        with open(path, "r", encoding="utf-8") as f:
            text = f.read()
    if begin_marker in text and end_marker in text:
        head, rest = text.split(begin_marker, 1)
        _, tail = rest.split(end_marker, 1)
        text = head + block.rstrip("\n") + tail
    elif section_title and section_title in text:
        head, tail = text.split(section_title, 1)
        text = head + section_title + "\n\n" + block + tail
    else:
        if not text:
            text = "# Benchmarks\n\nMeasurements of claimguard, each section written by the script it names.\n"
        prefix = f"\n\n{section_title}\n\n" if section_title else "\n\n"
        text = text.rstrip("\n") + prefix + block
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
