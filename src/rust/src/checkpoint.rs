//! Durable, append-only checkpoint files for resumable bootstraps.
//!
//! A checkpoint is the 8-byte file magic `WISPCKP1` followed by frames, one
//! per finished replicate, each appended with a single `write` under an
//! exclusive `flock` and made durable with `fsync` before the writer goes on.
//! A frame is
//!
//! ```text
//! "WCKF" | payload length (u64, LE) | FNV-1a-64 of (length bytes ++ payload) (u64, LE) | payload
//! ```
//!
//! and its payload is an [`Entry`] in bincode. A reader checks every frame's
//! magic, length and checksum. A frame that fails (a tail cut short by a
//! crash or a full disk, or bytes damaged in place) is skipped: the reader
//! searches forward for the next frame that checks out, so only the
//! replicates in damaged bytes are lost. [`open`] rewrites a damaged file
//! (to a temporary file that is fsync'd and renamed over it) before new
//! frames are appended.
//!
//! Several processes may append to one file at once (the forked workers of
//! `mclapply`, the fork engine's parent, a serial loop): every append takes
//! the lock, so frames never interleave. Rewriting is not coordinated with
//! appenders; one bootstrap run per checkpoint file at a time.

use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// The first bytes of every checkpoint file.
pub const FILE_MAGIC: &[u8; 8] = b"WISPCKP1";
const FRAME_MAGIC: &[u8; 4] = b"WCKF";
const FRAME_HEADER_BYTES: usize = 4 + 8 + 8;
/// Longest payload a reader accepts (a damaged length field can claim anything).
const MAX_PAYLOAD_BYTES: u64 = 1 << 36;

/// FNV-1a, 64 bits, over the concatenation of `parts`.
pub fn fnv1a64(parts: &[&[u8]]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &byte in *part {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    hash
}

/// The fitted values of a replicate that succeeded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FitSummary {
    pub parameters: Vec<f64>,
    pub penalized_nll: f64,
    pub nll: f64,
    pub code: String,
    pub converged: bool,
    pub evaluations: i32,
}

/// One finished replicate, as stored in a frame.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Fingerprint of the bootstrap plan (the fit) the replicate belongs to.
    pub plan_hash: u64,
    /// The bootstrap seed, as R gave it.
    pub seed: f64,
    /// Replicate number, from 1.
    pub replicate: u32,
    /// `None` when the replicate failed, with `reason` saying why.
    pub fit: Option<FitSummary>,
    pub reason: Option<String>,
    pub seconds: Option<f64>,
    pub pid: Option<i32>,
    pub peak_rss_mb: Option<f64>,
    pub pss_mb: Option<f64>,
    pub private_dirty_mb: Option<f64>,
}

/// A stretch of a checkpoint file that held no valid frame.
#[derive(Clone, Debug, PartialEq)]
pub struct Damage {
    /// Byte offset in the file.
    pub offset: u64,
    pub length: u64,
    /// Whether the stretch runs to the end of the file (a cut-short tail).
    pub at_end: bool,
}

/// What a reader found in a checkpoint file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Contents {
    pub entries: Vec<Entry>,
    pub damage: Vec<Damage>,
    /// Whether the file existed (with at least part of its magic).
    pub existed: bool,
}

fn bincode_config() -> bincode::config::Configuration {
    bincode::config::standard()
}

/// The bytes of one frame holding `entry`.
pub fn encode_frame(entry: &Entry) -> Result<Vec<u8>, String> {
    let payload = bincode::serde::encode_to_vec(entry, bincode_config())
        .map_err(|e| format!("cannot encode a checkpoint entry: {e}"))?;
    let length = (payload.len() as u64).to_le_bytes();
    let checksum = fnv1a64(&[&length, &payload]).to_le_bytes();
    let mut frame = Vec::with_capacity(FRAME_HEADER_BYTES + payload.len());
    frame.extend_from_slice(FRAME_MAGIC);
    frame.extend_from_slice(&length);
    frame.extend_from_slice(&checksum);
    frame.extend_from_slice(&payload);
    Ok(frame)
}

/// The entry in the frame starting at `bytes[0]`, and the frame's length;
/// `None` when there is no valid frame there.
fn frame_at(bytes: &[u8]) -> Option<(Entry, usize)> {
    if bytes.len() < FRAME_HEADER_BYTES || &bytes[..4] != FRAME_MAGIC {
        return None;
    }
    let length_bytes: [u8; 8] = bytes[4..12].try_into().ok()?;
    let length = u64::from_le_bytes(length_bytes);
    if length > MAX_PAYLOAD_BYTES {
        return None;
    }
    let end = FRAME_HEADER_BYTES.checked_add(usize::try_from(length).ok()?)?;
    let payload = bytes.get(FRAME_HEADER_BYTES..end)?;
    let checksum = u64::from_le_bytes(bytes[12..20].try_into().ok()?);
    if fnv1a64(&[&length_bytes, payload]) != checksum {
        return None;
    }
    let entry = crate::codec::decode_exact::<Entry>(payload, "a checkpoint entry").ok()?;
    Some((entry, end))
}

fn find_magic(bytes: &[u8], from: usize) -> Option<usize> {
    bytes
        .get(from..)?
        .windows(FRAME_MAGIC.len())
        .position(|w| w == FRAME_MAGIC)
        .map(|at| from + at)
}

/// Parses the frames of a checkpoint file's bytes (after its magic), which
/// start at byte `base` of the file.
pub fn parse_frames(bytes: &[u8], base: u64) -> (Vec<Entry>, Vec<Damage>) {
    let mut entries = Vec::new();
    let mut damage = Vec::new();
    let mut at = 0usize;
    let mut damaged_since: Option<usize> = None;
    while at < bytes.len() {
        if let Some((entry, length)) = frame_at(&bytes[at..]) {
            if let Some(start) = damaged_since.take() {
                damage.push(Damage {
                    offset: base + start as u64,
                    length: (at - start) as u64,
                    at_end: false,
                });
            }
            entries.push(entry);
            at += length;
            continue;
        }
        damaged_since.get_or_insert(at);
        match find_magic(bytes, at + 1) {
            Some(next) => at = next,
            None => at = bytes.len(),
        }
    }
    if let Some(start) = damaged_since {
        damage.push(Damage {
            offset: base + start as u64,
            length: (bytes.len() - start) as u64,
            at_end: true,
        });
    }
    (entries, damage)
}

/// Why a checkpoint cannot be used at all.
#[derive(Debug, PartialEq)]
pub enum CheckpointError {
    /// The file exists but is not a wispack checkpoint; it is left alone.
    NotCheckpoint(String),
    Io(String),
}

impl std::fmt::Display for CheckpointError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CheckpointError::NotCheckpoint(path) => write!(
                f,
                "'{path}' exists and is not a wispack checkpoint (it was left unchanged)"
            ),
            CheckpointError::Io(message) => f.write_str(message),
        }
    }
}

fn io_error(what: &str, path: &Path, error: std::io::Error) -> CheckpointError {
    CheckpointError::Io(format!("cannot {what} '{}': {error}", path.display()))
}

/// Reads a checkpoint file; a missing file is empty.
pub fn read(path: &Path) -> Result<Contents, CheckpointError> {
    let mut bytes = Vec::new();
    match File::open(path) {
        Ok(mut file) => {
            let metadata = file.metadata().map_err(|e| io_error("inspect", path, e))?;
            if !metadata.is_file() {
                // A device such as /dev/zero would never end.
                return Err(CheckpointError::Io(format!(
                    "'{}' is not a regular file",
                    path.display()
                )));
            }
            file.read_to_end(&mut bytes)
                .map_err(|e| io_error("read", path, e))?;
        }
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Contents::default()),
        Err(e) => return Err(io_error("open", path, e)),
    }
    let magic_len = bytes.len().min(FILE_MAGIC.len());
    if bytes[..magic_len] != FILE_MAGIC[..magic_len] {
        return Err(CheckpointError::NotCheckpoint(path.display().to_string()));
    }
    if bytes.len() < FILE_MAGIC.len() {
        // Created but cut short before its magic was complete.
        return Ok(Contents {
            entries: Vec::new(),
            damage: if bytes.is_empty() {
                Vec::new()
            } else {
                vec![Damage {
                    offset: 0,
                    length: bytes.len() as u64,
                    at_end: true,
                }]
            },
            existed: !bytes.is_empty(),
        });
    }
    let (entries, damage) = parse_frames(&bytes[FILE_MAGIC.len()..], FILE_MAGIC.len() as u64);
    Ok(Contents {
        entries,
        damage,
        existed: true,
    })
}

fn sync_directory_of(path: &Path) -> Result<(), CheckpointError> {
    let directory = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let handle = File::open(&directory).map_err(|e| io_error("open", &directory, e))?;
    handle
        .sync_all()
        .map_err(|e| io_error("sync", &directory, e))
}

/// Writes a complete checkpoint holding `entries` to `path`, atomically
/// (temporary file, fsync, rename, fsync of the directory).
fn write_whole(path: &Path, entries: &[Entry]) -> Result<(), CheckpointError> {
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(format!(".tmp{}", std::process::id()));
    let temporary = PathBuf::from(temporary);
    let result = (|| {
        let mut file = File::create(&temporary).map_err(|e| io_error("create", &temporary, e))?;
        let mut bytes = FILE_MAGIC.to_vec();
        for entry in entries {
            bytes.extend(encode_frame(entry).map_err(CheckpointError::Io)?);
        }
        file.write_all(&bytes)
            .map_err(|e| io_error("write", &temporary, e))?;
        file.sync_all()
            .map_err(|e| io_error("sync", &temporary, e))?;
        std::fs::rename(&temporary, path).map_err(|e| io_error("replace", path, e))?;
        sync_directory_of(path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    result
}

/// Opens a checkpoint for a run: creates it when absent, and rewrites it
/// without its damaged bytes when some frames were damaged. Returns what it
/// held (the damage as found, before the rewrite).
pub fn open(path: &Path) -> Result<Contents, CheckpointError> {
    let contents = read(path)?;
    if !contents.existed || !contents.damage.is_empty() {
        write_whole(path, &contents.entries)?;
    }
    Ok(contents)
}

/// Appends frames to a checkpoint file, durably.
pub struct Appender {
    file: File,
    path: PathBuf,
}

impl Appender {
    /// Opens an existing checkpoint (made by [`open`]) for appending.
    pub fn new(path: &Path) -> Result<Self, CheckpointError> {
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|e| io_error("open", path, e))?;
        Ok(Appender {
            file,
            path: path.to_path_buf(),
        })
    }

    /// Appends one entry and returns once it is on disk.
    pub fn append(&mut self, entry: &Entry) -> Result<(), CheckpointError> {
        let frame = encode_frame(entry).map_err(CheckpointError::Io)?;
        let fd = self.file.as_raw_fd();
        // SAFETY: flock on a descriptor we own; released below or when it closes.
        while unsafe { libc::flock(fd, libc::LOCK_EX) } != 0 {
            let error = std::io::Error::last_os_error();
            if error.kind() != ErrorKind::Interrupted {
                return Err(io_error("lock", &self.path, error));
            }
        }
        let written = self
            .file
            .write_all(&frame)
            .and_then(|()| self.file.sync_data());
        // SAFETY: as above.
        unsafe { libc::flock(fd, libc::LOCK_UN) };
        written.map_err(|e| io_error("append to", &self.path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(replicate: u32, parameters: usize) -> Entry {
        Entry {
            plan_hash: 0xfeed,
            seed: 7.0,
            replicate,
            fit: Some(FitSummary {
                parameters: (0..parameters).map(|i| i as f64 + 0.5).collect(),
                penalized_nll: 1.5,
                nll: 1.25,
                code: "converged".into(),
                converged: true,
                evaluations: 17,
            }),
            reason: None,
            seconds: Some(0.1),
            pid: Some(42),
            peak_rss_mb: None,
            pss_mb: Some(3.0),
            private_dirty_mb: None,
        }
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("wispack-ckpt-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        let _ = std::fs::remove_file(&path);
        path
    }

    /// Removes a scratch file and, once empty, the scratch directory.
    fn done(path: &Path) {
        let _ = std::fs::remove_file(path);
        if let Some(dir) = path.parent() {
            let _ = std::fs::remove_dir(dir);
        }
    }

    fn write_entries(path: &Path, entries: &[Entry]) {
        open(path).unwrap();
        let mut appender = Appender::new(path).unwrap();
        for e in entries {
            appender.append(e).unwrap();
        }
    }

    #[test]
    fn fnv_matches_reference_values() {
        assert_eq!(fnv1a64(&[b""]), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(&[b"a"]), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(&[b"foo", b"bar"]), fnv1a64(&[b"foobar"]));
    }

    #[test]
    fn entries_round_trip_and_a_missing_file_is_empty() {
        let path = scratch("round-trip");
        assert_eq!(read(&path).unwrap(), Contents::default());
        let entries: Vec<Entry> = (1..=5).map(|r| entry(r, 100)).collect();
        write_entries(&path, &entries);
        let contents = read(&path).unwrap();
        assert_eq!(contents.entries, entries);
        assert!(contents.damage.is_empty() && contents.existed);
        done(&path);
    }

    #[test]
    fn a_truncated_tail_loses_only_its_frame() {
        let path = scratch("truncated");
        let entries: Vec<Entry> = (1..=4).map(|r| entry(r, 50)).collect();
        write_entries(&path, &entries);
        let bytes = std::fs::read(&path).unwrap();
        for cut in [1usize, 10, 20, 100] {
            std::fs::write(&path, &bytes[..bytes.len() - cut]).unwrap();
            let contents = read(&path).unwrap();
            assert_eq!(contents.entries, entries[..3], "cut {cut}");
            assert_eq!(contents.damage.len(), 1);
            assert!(contents.damage[0].at_end);
        }
        // open() repairs the file; appending then works as usual.
        open(&path).unwrap();
        assert!(read(&path).unwrap().damage.is_empty());
        Appender::new(&path).unwrap().append(&entries[3]).unwrap();
        assert_eq!(read(&path).unwrap().entries, entries);
        done(&path);
    }

    #[test]
    fn damage_in_the_middle_is_skipped() {
        let path = scratch("middle");
        let entries: Vec<Entry> = (1..=5).map(|r| entry(r, 30)).collect();
        write_entries(&path, &entries);
        let clean = std::fs::read(&path).unwrap();
        let frame_len = encode_frame(&entries[0]).unwrap().len();
        let third = FILE_MAGIC.len() + 2 * frame_len;
        // A flipped payload byte, a flipped length byte, a flipped magic byte.
        for offset in [third + FRAME_HEADER_BYTES + 5, third + 6, third + 1] {
            let mut bytes = clean.clone();
            bytes[offset] ^= 0x5a;
            std::fs::write(&path, &bytes).unwrap();
            let contents = read(&path).unwrap();
            let replicates: Vec<u32> = contents.entries.iter().map(|e| e.replicate).collect();
            assert_eq!(replicates, vec![1, 2, 4, 5], "offset {offset}");
            assert_eq!(contents.damage.len(), 1);
            assert!(!contents.damage[0].at_end);
            assert_eq!(contents.damage[0].offset, third as u64);
        }
        // Garbage appended after a crash, then more frames: all good frames survive.
        let mut bytes = clean.clone();
        bytes.extend_from_slice(b"WCKF\xff\xff garbage");
        bytes.extend(encode_frame(&entry(6, 30)).unwrap());
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(read(&path).unwrap().entries.len(), 6);
        done(&path);
    }

    #[test]
    fn devices_are_refused() {
        assert!(matches!(
            read(Path::new("/dev/zero")),
            Err(CheckpointError::Io(_))
        ));
    }

    #[test]
    fn foreign_files_are_refused_and_left_alone() {
        let path = scratch("foreign");
        std::fs::write(&path, b"count,bin\n1,2\n").unwrap();
        assert!(matches!(
            open(&path),
            Err(CheckpointError::NotCheckpoint(_))
        ));
        assert_eq!(std::fs::read(&path).unwrap(), b"count,bin\n1,2\n");
        // A file cut short inside its magic is an empty checkpoint.
        std::fs::write(&path, &FILE_MAGIC[..3]).unwrap();
        let contents = open(&path).unwrap();
        assert!(contents.entries.is_empty());
        assert_eq!(std::fs::read(&path).unwrap(), FILE_MAGIC);
        done(&path);
    }

    #[test]
    fn concurrent_appenders_never_interleave() {
        let path = scratch("concurrent");
        open(&path).unwrap();
        let mut children = Vec::new();
        for child in 0..4u32 {
            // SAFETY: the test harness runs single-threaded (--test-threads=1);
            // the child only appends and leaves with _exit.
            match unsafe { nix::unistd::fork() }.unwrap() {
                nix::unistd::ForkResult::Child => {
                    let mut appender = Appender::new(&path).unwrap();
                    for r in 0..25 {
                        appender.append(&entry(child * 100 + r, 2000)).unwrap();
                    }
                    unsafe { libc::_exit(0) };
                }
                nix::unistd::ForkResult::Parent { child } => children.push(child),
            }
        }
        for child in children {
            nix::sys::wait::waitpid(child, None).unwrap();
        }
        let contents = read(&path).unwrap();
        assert!(contents.damage.is_empty());
        assert_eq!(contents.entries.len(), 100);
        done(&path);
    }

    #[test]
    fn large_entries_survive() {
        let path = scratch("large");
        let big = entry(1, 100_000);
        write_entries(&path, std::slice::from_ref(&big));
        assert_eq!(read(&path).unwrap().entries, vec![big]);
        done(&path);
    }
}
