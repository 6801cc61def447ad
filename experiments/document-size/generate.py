#!/usr/bin/env python3
"""Writes the documents of experiments/document-size.toml and their expected answers,
and the trusted-document manifest of experiments/persisted.toml.

A document of N fields is `query { topPosts(count: 1) { f0: pid f1: title f2: content
f3: pid ... } }`: one root field (one resolver, cached at TTL 10) and N aliased leaf
fields cycling through Post's three scalar fields. The manifest
(experiments/persisted/manifest.json) is Apollo's persisted query manifest of the
1-, 100- and 5000-field documents, each with its SHA-256 as id. Run from anywhere:
    python3 experiments/document-size/generate.py
"""
import hashlib
import json
import pathlib

HERE = pathlib.Path(__file__).resolve().parent
POST_1 = {"pid": "p1", "title": "Post 1", "content": "Content 1"}
NAMES = ["pid", "title", "content"]

operations = []
for n in (1, 100, 1000, 5000):
    fields = [(f"f{i}", NAMES[i % 3]) for i in range(n)]
    document = "query { topPosts(count: 1) { %s } }\n" % " ".join(f"{a}: {f}" for a, f in fields)
    expected = {"data": {"topPosts": [{a: POST_1[f] for a, f in fields}]}}
    (HERE / f"fields-{n}.graphql").write_text(document)
    (HERE / f"fields-{n}.expected.json").write_text(json.dumps(expected, separators=(",", ":")) + "\n")
    if n in (1, 100, 5000):
        operations.append({
            "id": hashlib.sha256(document.encode()).hexdigest(),
            "name": f"fields-{n}",
            "type": "query",
            "body": document,
        })

manifest = {"format": "apollo-persisted-query-manifest", "version": 1, "operations": operations}
(HERE.parent / "persisted").mkdir(exist_ok=True)
(HERE.parent / "persisted" / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
