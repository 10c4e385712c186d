//! Ingest throughput (MB/s) on a generated log.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use hvaudit::ingest::{IngestOptions, ingest};
use hvaudit_synth::{SynthOptions, generate};

fn bench_ingest(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bench.ndjson");
    let opts = SynthOptions {
        seed: 7,
        target_bytes: 64 << 20,
        dialect_mix: 0.2,
        violations: true,
        redelivery_rate: 0.01,
    };
    let mut log = std::io::BufWriter::new(std::fs::File::create(&path).expect("create log"));
    let stats = generate(&opts, &mut log, &mut std::io::sink()).expect("generate");
    drop(log);
    let mut group = c.benchmark_group("ingest");
    group.throughput(Throughput::Bytes(stats.bytes));
    group.sample_size(10);
    group.bench_function("ndjson_64MB", |b| {
        b.iter(|| ingest(std::slice::from_ref(&path), &IngestOptions::default()).expect("ingest"))
    });
    group.finish();
}

criterion_group!(benches, bench_ingest);
criterion_main!(benches);
