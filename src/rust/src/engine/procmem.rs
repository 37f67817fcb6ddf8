//! Readers for the memory figures the kernel keeps about the calling process.
//!
//! They read `/proc/self/*` only, so they are safe to call in a forked child
//! that must not touch the R API. Only Linux has these files: on macOS,
//! Windows and Linux systems without `/proc` every figure is `None` (`NA` in
//! R) rather than an error. Memory reporting is informative, never fatal.
//! (macOS and Windows have a peak resident size of their own, but nothing
//! like PSS or private dirty pages, and their figures would not be
//! comparable with Linux's, so none is reported there.)

use serde::{Deserialize, Serialize};
use std::fs;

/// Memory of one process at one moment, in mebibytes (MiB).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct MemorySnapshot {
    /// Peak resident set size since the process started (`VmHWM`).
    pub(crate) peak_rss_mb: Option<f64>,
    /// Proportional set size: shared pages divided among their sharers.
    pub(crate) pss_mb: Option<f64>,
    /// Pages written by this process since fork (copy-on-write copies included).
    pub(crate) private_dirty_mb: Option<f64>,
}

const KIB_PER_MIB: f64 = 1024.0;

/// Reads the calling process's peak RSS, PSS and private dirty memory
/// (Linux; all `None` elsewhere).
pub(crate) fn snapshot_self() -> MemorySnapshot {
    if !cfg!(target_os = "linux") {
        return MemorySnapshot::default();
    }
    let status = fs::read_to_string("/proc/self/status").ok();
    let rollup = fs::read_to_string("/proc/self/smaps_rollup").ok();
    MemorySnapshot {
        peak_rss_mb: status
            .as_deref()
            .and_then(|s| field_kib(s, "VmHWM:"))
            .map(kib_to_mib),
        pss_mb: rollup
            .as_deref()
            .and_then(|s| field_kib(s, "Pss:"))
            .map(kib_to_mib),
        private_dirty_mb: rollup
            .as_deref()
            .and_then(|s| field_kib(s, "Private_Dirty:"))
            .map(kib_to_mib),
    }
}

/// The calling process's peak RSS only (Linux; `None` elsewhere): reading
/// it costs next to nothing, unlike PSS and private dirty, whose
/// `smaps_rollup` makes the kernel walk every page table of the process.
pub(crate) fn snapshot_peak() -> MemorySnapshot {
    if !cfg!(target_os = "linux") {
        return MemorySnapshot::default();
    }
    let status = fs::read_to_string("/proc/self/status").ok();
    MemorySnapshot {
        peak_rss_mb: status
            .as_deref()
            .and_then(|s| field_kib(s, "VmHWM:"))
            .map(kib_to_mib),
        ..MemorySnapshot::default()
    }
}

/// Size of the calling process's virtual address space in bytes (`VmSize`),
/// the quantity `RLIMIT_AS` limits (Linux).
#[cfg(unix)]
pub(crate) fn address_space_bytes() -> Option<u64> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    field_kib(&status, "VmSize:").map(|kib| kib * 1024)
}

/// Returns freed heap pages to the system (glibc `malloc_trim`), for
/// processes that run several tasks; a no-op elsewhere.
pub(crate) fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}

fn kib_to_mib(kib: u64) -> f64 {
    kib as f64 / KIB_PER_MIB
}

/// The value of a `Name:   123 kB` line, in KiB.
fn field_kib(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find(|line| line.starts_with(name))
        .and_then(|line| line[name.len()..].split_whitespace().next())
        .and_then(|value| value.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kib_fields_by_exact_name() {
        let text = "Rss:     2048 kB\nPss:      512 kB\nPss_Anon:  100 kB\nPrivate_Dirty:  64 kB\n";
        assert_eq!(field_kib(text, "Pss:"), Some(512));
        assert_eq!(field_kib(text, "Private_Dirty:"), Some(64));
        assert_eq!(field_kib(text, "Swap:"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn snapshot_sees_a_touched_buffer() {
        let before = snapshot_self();
        let mut buffer = vec![0u8; 64 << 20];
        for page in buffer.chunks_mut(4096) {
            page[0] = 1;
        }
        let after = snapshot_self();
        std::hint::black_box(&buffer);
        let grown = after.private_dirty_mb.unwrap() - before.private_dirty_mb.unwrap();
        assert!(
            grown > 60.0,
            "private dirty grew by {grown} MiB, expected about 64"
        );
        assert!(after.peak_rss_mb.unwrap() >= after.pss_mb.unwrap() - 1.0);
        assert!(address_space_bytes().unwrap() > 64 << 20);
    }
}
