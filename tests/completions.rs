//! `hvaudit completions SHELL` and `hvaudit man`: generated from the clap
//! definitions, so every command and option the binary takes is in them.

use crate::common::hvaudit;
use std::time::Duration;

const SUBCOMMANDS: &[&str] = &[
    "audit",
    "sql",
    "convert",
    "rules",
    "synth",
    "replay",
    "diff",
    "config",
    "completions",
    "man",
];

fn hvaudit_stdout(args: &[&str]) -> String {
    let out = hvaudit()
        .timeout(Duration::from_secs(60))
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// What bash's completion offers for `words` (the last one being
/// completed) once the script is loaded.
fn bash_completes(script: &std::path::Path, words: &[&str]) -> Vec<String> {
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let last = words.len() - 1;
    let program = format!(
        "source '{}'; COMP_WORDS=({}); COMP_CWORD={last}; \
         _hvaudit hvaudit {} {}; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display(),
        quoted.join(" "),
        quoted[last],
        quoted[last.saturating_sub(1)],
    );
    let out = std::process::Command::new("bash")
        .args(["--noprofile", "--norc", "-c", &program])
        .output()
        .expect("bash runs");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn bash_completes_commands_options_and_their_values() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("hvaudit.bash");
    std::fs::write(&script, hvaudit_stdout(&["completions", "bash"])).unwrap();
    assert_eq!(bash_completes(&script, &["hvaudit", "au"]), ["audit"]);
    let all = bash_completes(&script, &["hvaudit", ""]);
    for sub in SUBCOMMANDS {
        assert!(all.iter().any(|c| c == sub), "{sub} not in {all:?}");
    }
    assert_eq!(
        bash_completes(&script, &["hvaudit", "sql", "--exe"]),
        ["--execute"]
    );
    assert_eq!(
        bash_completes(&script, &["hvaudit", "sql", "--format", ""]),
        ["table", "csv", "json", "ndjson", "parquet"]
    );
    assert_eq!(
        bash_completes(&script, &["hvaudit", "rules", "list", "--format", ""]),
        ["text", "md"]
    );
}

#[test]
fn every_shell_gets_a_script_naming_every_command() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = hvaudit_stdout(&["completions", shell]);
        for sub in SUBCOMMANDS {
            assert!(script.contains(sub), "{shell}: no {sub}");
        }
        assert!(script.contains("max-line-bytes"), "{shell}");
    }
    let out = hvaudit()
        .timeout(Duration::from_secs(60))
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

/// `page` formatted by groff as text; groff's warnings fail the test.
fn groff(page: &[u8]) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new("groff")
        .args(["-man", "-Tascii", "-ww", "-P-c"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("groff runs (apt-get install groff-base)");
    child.stdin.take().unwrap().write_all(page).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Bold and underlined text come as overstrikes without -P-c's colour;
    // drop the backspaced pairs to read the words.
    let text = String::from_utf8(out.stdout).unwrap();
    let mut plain = String::new();
    for ch in text.chars() {
        if ch == '\u{8}' {
            plain.pop();
        } else {
            plain.push(ch);
        }
    }
    plain
}

#[test]
fn the_man_page_lists_every_command_and_the_global_options() {
    let page = hvaudit_stdout(&["man"]);
    assert!(page.contains(".TH hvaudit 1"), "{page}");
    let text = groff(page.as_bytes());
    // Each subcommand is listed by its own page's name.
    for sub in SUBCOMMANDS {
        assert!(
            text.lines()
                .any(|l| l.trim() == format!("hvaudit-{sub}(1)")),
            "{sub} not in\n{text}"
        );
    }
    assert!(text.contains("--no-config"), "{text}");
    assert!(
        text.contains("Run the audit rules and write a report"),
        "{text}"
    );
}

#[test]
fn man_dir_writes_a_page_per_command_with_its_options() {
    let dir = tempfile::tempdir().unwrap();
    let out = hvaudit_stdout(&["man", "--dir", dir.path().to_str().unwrap()]);
    assert_eq!(out, "");
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    for sub in SUBCOMMANDS {
        assert!(
            names.contains(&format!("hvaudit-{sub}.1")),
            "{sub}: {names:?}"
        );
    }
    for nested in ["hvaudit.1", "hvaudit-rules-list.1", "hvaudit-config-show.1"] {
        assert!(names.iter().any(|n| n == nested), "{nested}: {names:?}");
    }
    let sql = groff(&std::fs::read(dir.path().join("hvaudit-sql.1")).unwrap());
    for option in ["--execute", "--format", "--max-line-bytes", "--in-place"] {
        assert!(sql.contains(option), "{option} not in\n{sql}");
    }
    // A file in the way is a usage error, not a directory made up.
    let file = dir.path().join("hvaudit.1");
    let out = hvaudit()
        .timeout(Duration::from_secs(60))
        .args(["man", "--dir"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a directory"));
}
