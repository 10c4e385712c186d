//! Embeds every file under queries/views and queries/rules in the binary.

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    // Read at run time, not `env!`: a cached build script must not point at
    // the checkout it was first compiled in.
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = Path::new(&manifest).join("queries");
    let mut code = String::new();
    for dir in ["views", "rules"] {
        let path = root.join(dir);
        println!("cargo:rerun-if-changed={}", path.display());
        let mut files: Vec<_> = std::fs::read_dir(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
            .filter_map(Result::ok)
            .map(|e| e.path())
            .collect();
        files.retain(|p| p.extension().is_some_and(|x| x == "sql"));
        files.sort();
        writeln!(
            code,
            "pub const {}: &[(&str, &str)] = &[",
            dir.to_uppercase()
        )
        .unwrap();
        for f in files {
            println!("cargo:rerun-if-changed={}", f.display());
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            writeln!(
                code,
                "    ({name:?}, include_str!({:?})),",
                f.display().to_string()
            )
            .unwrap();
        }
        code.push_str("];\n");
    }
    let out = Path::new(&std::env::var("OUT_DIR").unwrap()).join("embedded_queries.rs");
    std::fs::write(out, code).unwrap();
}
