//! The document cache's key: SHA-256 (Apollo Server's choice) against 128-bit xxh3
//! (the gateway's), on the documents of the document-size experiment (1, 100 and 1000
//! aliased fields), next to what the key saves: parsing the same text.
//!
//! Run: `cargo bench -p gateway --bench document_key -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use sha2::{Digest, Sha256};

/// `query { topPosts(count: 1) { f0: pid f1: title f2: content … } }` with `n` fields.
fn document(n: usize) -> String {
    const NAMES: [&str; 3] = ["pid", "title", "content"];
    let fields: Vec<String> = (0..n).map(|i| format!("f{i}: {}", NAMES[i % 3])).collect();
    format!("query {{ topPosts(count: 1) {{ {} }} }}", fields.join(" "))
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("document_key");
    for n in [1usize, 100, 1000] {
        let text = document(n);
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_with_input(BenchmarkId::new("xxh3_128", n), &text, |b, t| {
            b.iter(|| xxhash_rust::xxh3::xxh3_128(black_box(t.as_bytes())))
        });
        group.bench_with_input(BenchmarkId::new("sha256", n), &text, |b, t| {
            b.iter(|| Sha256::digest(black_box(t.as_bytes())))
        });
        group.bench_with_input(BenchmarkId::new("parse", n), &text, |b, t| {
            b.iter(|| async_graphql_parser::parse_query(black_box(t.as_str())).is_ok())
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
