"""Per-file pass counts from a pytest JUnit XML report, as a Markdown table.

Usage: python counts.py REPORT.xml  (prints the table; exit status 0)
"""

from __future__ import annotations

import collections
import sys
import xml.etree.ElementTree as ET


def main(path: str) -> None:
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for case in ET.parse(path).getroot().iter("testcase"):
        module = case.get("classname", "").split(".")[-1] or case.get("file", "?")
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed"
            elif child.tag == "skipped":
                outcome = "skipped"
        counts[module][outcome] += 1
    print("| file | passed | failed | skipped |")
    print("|---|---|---|---|")
    total: collections.Counter[str] = collections.Counter()
    for module in sorted(counts):
        c = counts[module]
        total.update(c)
        print(f"| {module} | {c['passed']} | {c['failed']} | {c['skipped']} |")
    print(f"| all | {total['passed']} | {total['failed']} | {total['skipped']} |")


if __name__ == "__main__":
    main(sys.argv[1])
