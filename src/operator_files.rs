//! Files the operator names beside the logs' paths (the configuration, the
//! suppression file, the baseline): read only when they are regular files,
//! and text files only up to a size, so that `--config /dev/zero` or a FIFO
//! named by mistake cannot hold the run or take the machine's memory.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// The largest configuration or suppression file read: far past any real
/// one (a suppression file of 100,000 entries is about 15 MB).
pub const TEXT_LIMIT: u64 = 64 << 20;

/// `path` opened, when it is a regular file (checked on the open file, so
/// that the name cannot be swapped for a device between check and read).
pub fn open_regular(path: &Path) -> io::Result<File> {
    let not_regular = || {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file (a device, FIFO or directory); name a file",
        )
    };
    // Checked by name first, since opening a FIFO waits for a writer; then
    // on the open file, which no rename can change.
    if !std::fs::metadata(path)?.is_file() {
        return Err(not_regular());
    }
    let file = File::open(path)?;
    if !file.metadata()?.is_file() {
        return Err(not_regular());
    }
    Ok(file)
}

/// The text of the regular file `path`, refused past `limit` bytes.
pub fn read_text(path: &Path, limit: u64) -> io::Result<String> {
    let mut text = String::new();
    open_regular(path)?
        .take(limit + 1)
        .read_to_string(&mut text)?;
    if text.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than {limit} bytes, far past any real one"),
        ));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_fifos_and_directories_are_refused_and_large_files_capped() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        for special in [fifo.as_path(), dir.path(), Path::new("/dev/zero")] {
            let e = read_text(special, TEXT_LIMIT).unwrap_err();
            assert!(e.to_string().contains("not a regular file"), "{e}");
        }
        let big = dir.path().join("big.toml");
        std::fs::write(&big, vec![b'#'; 101]).unwrap();
        let e = read_text(&big, 100).unwrap_err();
        assert!(e.to_string().contains("larger than 100 bytes"), "{e}");
        std::fs::write(&big, b"a = 1\n").unwrap();
        assert_eq!(read_text(&big, 100).unwrap(), "a = 1\n");
    }
}
