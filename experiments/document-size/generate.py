#!/usr/bin/env python3
"""Writes the documents of experiments/document-size.toml and their expected answers.

A document of N fields is `query { topPosts(count: 1) { f0: pid f1: title f2: content
f3: pid ... } }`: one root field (one resolver, cached at TTL 10) and N aliased leaf
fields cycling through Post's three scalar fields. Run from anywhere:
    python3 experiments/document-size/generate.py
"""
import json
import pathlib

HERE = pathlib.Path(__file__).resolve().parent
POST_1 = {"pid": "p1", "title": "Post 1", "content": "Content 1"}
NAMES = ["pid", "title", "content"]

for n in (1, 100, 1000):
    fields = [(f"f{i}", NAMES[i % 3]) for i in range(n)]
    document = "query { topPosts(count: 1) { %s } }\n" % " ".join(f"{a}: {f}" for a, f in fields)
    expected = {"data": {"topPosts": [{a: POST_1[f] for a, f in fields}]}}
    (HERE / f"fields-{n}.graphql").write_text(document)
    (HERE / f"fields-{n}.expected.json").write_text(json.dumps(expected, separators=(",", ":")) + "\n")
