//! The memory a run may still take on this machine: what the system says
//! is available, within the limit of the process's own control group (a
//! container's). A log whose loaded table would not fit it is read
//! through the spill directory even without `--memory-limit`, instead of
//! being loaded until the system kills the process.

use std::path::Path;

/// Overrides what is read from the system (a size as `--memory-limit`
/// takes it), to see the behaviour of a smaller machine.
pub const AVAILABLE_VAR: &str = "HVAUDIT_MEMORY_AVAILABLE";

/// Bytes available to this process, or None where the system does not
/// say (then a run without `--memory-limit` loads its log as it always
/// did).
pub fn available() -> Option<u64> {
    if let Some(given) = std::env::var_os(AVAILABLE_VAR) {
        return parse_size(&given.to_string_lossy()).ok();
    }
    let system = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| mem_available(&m));
    match (system, group_room()) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// `MemAvailable` of a `/proc/meminfo` text, in bytes.
fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let mut words = line.split_whitespace().skip(1);
    let n: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => n.checked_mul(1024),
        None => Some(n),
        Some(_) => None,
    }
}

/// The room left under the memory limit of this process's control group
/// (cgroup v2), if it has one.
fn group_room() -> Option<u64> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    let dir = Path::new("/sys/fs/cgroup").join(path.trim_start_matches('/'));
    let max = std::fs::read_to_string(dir.join("memory.max")).ok()?;
    let current = std::fs::read_to_string(dir.join("memory.current")).ok()?;
    room(&max, &current)
}

/// `memory.max` less `memory.current`; None when there is no limit
/// (`max`) or the files say something else.
fn room(max: &str, current: &str) -> Option<u64> {
    let max: u64 = max.trim().parse().ok()?;
    let current: u64 = current.trim().parse().ok()?;
    Some(max.saturating_sub(current))
}

/// Sizes like 512K, 16M, 2G, 1.5G or a plain byte count.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size; use e.g. 512M or 2G"))?;
    let mult = match unit
        .trim()
        .to_ascii_uppercase()
        .trim_end_matches("IB")
        .trim_end_matches('B')
    {
        "" => 1u64,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        "T" => 1 << 40,
        _ => return Err(format!("{s:?}: unknown unit; use K, M, G or T")),
    };
    Ok((n * mult as f64) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_available_memory_is_read_from_meminfo() {
        let meminfo =
            "MemTotal:       24576000 kB\nMemFree:  100 kB\nMemAvailable:   20000000 kB\n";
        assert_eq!(mem_available(meminfo), Some(20_000_000 * 1024));
        assert_eq!(mem_available("MemTotal: 5 kB\n"), None);
        assert_eq!(mem_available("MemAvailable: lots\n"), None);
    }

    #[test]
    fn a_control_group_limit_leaves_its_room() {
        assert_eq!(room("4294967296\n", "1073741824\n"), Some(3 << 30));
        assert_eq!(room("max\n", "1073741824\n"), None);
        assert_eq!(room("100\n", "200\n"), Some(0));
    }
}
