# SPDX-License-Identifier: MIT
"""Manifest text for apply: a YAML stream cut into its documents, without parsing YAML.

forkletd parses each document itself (POST with Content-Type: application/yaml takes one
Session document). YAML ends a document only at a line that starts with "---" or "..." in
column 0 (document markers cannot occur inside content), so cutting there is exact.
"""

import re

_START = re.compile(r"---(?:[ \t]|$)")
_END = re.compile(r"\.\.\.(?:[ \t]|$)")


def _has_content(lines):
    for line in lines:
        s = line.strip()
        if s and not s.startswith("#") and not line.startswith("%") and s not in ("---", "..."):
            return True
    return False


def split_documents(text):
    """Returns [(first_line, document_text)] (first_line counted from 0) for every document
    that holds more than comments, directives and markers. Each text is padded with
    first_line newlines, so forkletd's "manifest:LINE:COL" errors name lines of the whole
    text."""
    docs, cur, start = [], [], 0
    for i, line in enumerate(text.splitlines(keepends=True)):
        body = line.rstrip("\r\n")
        if _START.match(body):
            if _has_content(cur):
                docs.append((start, cur))
                cur, start = [], i
            else:
                # an empty document before this one: its marker becomes a blank line (the
                # line count stays), directives and comments stay with this document
                cur = ["\n" if _START.match(x) or _END.match(x) else x for x in cur]
        cur.append(line)
        if _END.match(body):
            if _has_content(cur):
                docs.append((start, cur))
            cur, start = [], i + 1
    if _has_content(cur):
        docs.append((start, cur))
    return [(first, "\n" * first + "".join(lines)) for first, lines in docs]
