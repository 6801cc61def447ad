//! What reading a subgraph's answer costs: the tape parse of one large answer
//! (`Tape::parse`, what the gateway runs on every answer it receives), per byte.
//! The answer is the deep query's committed one (`experiments/deep/deep-wishlist-chain.json`,
//! about 98.5 KB of the commerce graph's products, reviews and users), so the figure
//! holds for answers of that shape. `scripts/deep-ceilings.sh` multiplies it by the bytes
//! of the subgraph answers one deep query receives.
//!
//! Run: `cargo bench -p gateway --bench answer_parse -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use gateway::answer::tape::Tape;

fn bench(c: &mut Criterion) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../experiments/deep/deep-wishlist-chain.json"
    );
    let text = Bytes::from(std::fs::read(path).expect("the committed deep answer"));
    Tape::parse(text.clone()).expect("the deep answer parses");
    let mut group = c.benchmark_group("answer_parse");
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.bench_function("deep_answer", |b| {
        b.iter(|| black_box(Tape::parse(black_box(text.clone())).is_ok()))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
