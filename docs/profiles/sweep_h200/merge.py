#!/usr/bin/env python3
"""Merges one device session's benchmark files (cce_bench's or peers.py's, one per process) into one file.

    python3 merge.py OUT.json COMMIT NOTE IN.json [IN.json ...]

The benchmarks are concatenated in the order given; the context is the first file's, with the date of the last
one, cce_shapes joined over all files, and the commit keys (cce_commit, commit) set to COMMIT with NOTE beside them
as commit_note.
"""
import json
import sys

out, commit, note, inputs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
files = [json.load(open(f)) for f in inputs]
context = dict(files[0]["context"])
context["date"] = files[-1]["context"]["date"]
context["cce_shapes"] = ", ".join(f["context"]["cce_shapes"] for f in files)
for key in ("cce_commit", "commit"):
    if key in context:
        context[key] = commit
context["commit_note"] = note
skipped = []  # each reason once (every process of peers.py skips the same implementation)
for s in (s for f in files for s in f["context"].get("skipped", [])):
    if s not in skipped:
        skipped.append(s)
if skipped:
    context["skipped"] = skipped
merged = {"context": context, "benchmarks": [b for f in files for b in f["benchmarks"]]}
with open(out, "w") as fh:
    json.dump(merged, fh, indent=1)
    fh.write("\n")
print("%s: %d benchmarks from %d files" % (out, len(merged["benchmarks"]), len(files)))
