//! Many small inputs cost what their lines cost: 20,000 one-line files
//! held about 55 KB each (a batch of column headers per file) and made
//! every query take a pass per file.

use super::{numbered, read_with, write};
use hvaudit::ingest::Ingested;

fn held(ing: &Ingested) -> usize {
    ing.events
        .iter()
        .chain(&ing.evidence)
        .map(|b| b.get_array_memory_size())
        .sum()
}

#[test]
fn one_line_files_cost_what_the_same_lines_in_one_file_cost() {
    let n = 2_000;
    let dir = tempfile::tempdir().unwrap();
    let lines = numbered("e", n);
    let one = write(dir.path(), "one.ndjson", &lines);
    let many = dir.path().join("many");
    std::fs::create_dir(&many).unwrap();
    for (i, line) in lines.split_inclusive(|b| *b == b'\n').enumerate() {
        write(&many, &format!("{i:05}.ndjson"), line);
    }
    let one = read_with(&[one], &crate::common::test_reading());
    let many = read_with(&[many], &crate::common::test_reading());
    assert_eq!(many.inputs.len(), n);
    assert_eq!(many.total().events, n as u64);
    assert_eq!(one.total().events, n as u64);
    assert!(
        many.events.len() <= 2,
        "{} batches for {n} one-line files",
        many.events.len()
    );
    let (one, many) = (held(&one), held(&many));
    assert!(
        many <= 2 * one,
        "{many} bytes held for {n} files, {one} for one file of the same lines"
    );
}
