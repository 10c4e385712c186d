//! `--format jsonl`: one compact finding object a line, nothing else, so the
//! output streams into `jq -c`, log shippers or `wc -l`. With `--baseline`,
//! the baseline's findings that are gone follow, with `"baseline_state":
//! "absent"`.

use super::json::FindingJson;
use super::model::Report;
use std::io::Write;

pub(super) fn render(report: &Report, out: &mut dyn Write) -> anyhow::Result<()> {
    for f in report.findings.iter() {
        // serde_json escapes control characters, so a message cannot split a line.
        serde_json::to_writer(&mut *out, &FindingJson::new(&f))?;
        out.write_all(b"\n")?;
    }
    // Against a baseline, the findings it held that are gone, marked absent.
    for f in report.absent() {
        serde_json::to_writer(&mut *out, &FindingJson::new(f))?;
        out.write_all(b"\n")?;
    }
    Ok(())
}
