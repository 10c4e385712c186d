//! The whole rule set over an in-memory table (events/s).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use hvaudit::audit::{Audit, AuditConfig};
use hvaudit::ingest::{IngestOptions, ingest};
use hvaudit::tables::Tables;
use hvaudit_synth::{SynthOptions, generate};

fn bench_rules(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bench.ndjson");
    let opts = SynthOptions {
        seed: 11,
        target_bytes: 64 << 20,
        dialect_mix: 0.2,
        violations: true,
        redelivery_rate: 0.01,
    };
    let mut log = std::io::BufWriter::new(std::fs::File::create(&path).expect("create log"));
    generate(&opts, &mut log, &mut std::io::sink()).expect("generate");
    drop(log);
    let ingested = ingest(std::slice::from_ref(&path), &IngestOptions::default()).expect("ingest");
    let audit = Audit::new(AuditConfig::default());
    let catalog = audit.catalog().expect("rules load");
    let mut group = c.benchmark_group("rules");
    group.throughput(Throughput::Elements(ingested.total().events));
    let mut tables = Tables::loaded(ingested);
    group.sample_size(10);
    group.bench_function("all_rules_64MB", |b| {
        b.iter(|| audit.run_on(&catalog, &mut tables).expect("audit"))
    });
    group.finish();
}

criterion_group!(benches, bench_rules);
criterion_main!(benches);
