//! Durable, append-only checkpoint files for resumable bootstraps.
//!
//! A checkpoint is the 8-byte file magic [`FILE_MAGIC`] followed by frames
//! ([`crate::codec`]; magic `WCKF`), one per finished replicate, each
//! appended with a single `write` under an exclusive file lock (`flock`, or
//! `LockFileEx` on Windows: [`crate::platform::lock_exclusive`]) and made
//! durable with `fsync` before the writer goes on. A frame's payload is an
//! [`Entry`] in bincode: the replicate's [`Outcome`] with the fingerprint of
//! its plan and its seed. A reader checks every frame's magic, length and checksum. A
//! frame that fails (a tail cut short by a crash or a full disk, or bytes
//! damaged in place) is skipped: the reader searches forward for the next
//! frame that checks out, so only the replicates in damaged bytes are lost.
//! [`open`] rewrites a damaged file (to a temporary file that is fsync'd and
//! renamed over it) before new frames are appended.
//!
//! Several processes may append to one file at once (the forked workers of
//! `mclapply`, the fork engine's parent, `future` workers, a serial loop):
//! every append takes the lock, so frames never interleave. Rewriting is not
//! coordinated with appenders; one bootstrap run per checkpoint file at a
//! time.
//!
//! The file magic carries the kind of record and the format's number: a
//! change to [`Entry`] (or to [`Outcome`]) needs a new one, and files of
//! older formats are refused with a message that says so (see
//! [`OLDER_MAGICS`]). Bootstrap replicates are [`Entry`] records; a panel
//! fitted species by species keeps its species in a file of its own kind
//! ([`crate::nb::panel::SpeciesRecord`]), with the same frames and guarantees.

use crate::codec::{encode_frame, frame_payload};
use crate::error::Error;
use crate::outcome::Outcome;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::path::{Path, PathBuf};

/// The first bytes of every checkpoint file: "WISPCKP" and the format number.
pub(crate) const FILE_MAGIC: &[u8; 8] = b"WISPCKP2";
/// Magics of older formats, with the version that wrote them.
const OLDER_MAGICS: &[(&[u8; 8], &str)] = &[(b"WISPCKP1", "wispack 0.1.0 before format 2")];
const FRAME_MAGIC: &[u8; 4] = b"WCKF";
/// Longest payload a reader accepts (a damaged length field can claim anything).
const MAX_PAYLOAD_BYTES: u64 = 1 << 36;

/// What a kind of checkpoint file holds, one per frame.
pub(crate) trait Record: Serialize + DeserializeOwned {
    /// The first bytes of every file of this kind: "WISP", the kind, the format number.
    const FILE_MAGIC: &'static [u8; 8];
    /// Magics of older formats of this kind, with the version that wrote them.
    const OLDER_MAGICS: &'static [(&'static [u8; 8], &'static str)];
    const FRAME_MAGIC: &'static [u8; 4];
    /// What a file of this kind is, for messages ("a bootstrap's checkpoint").
    const KIND: &'static str;
}

/// The first bytes of a fit's checkpoint (its genes: the record of
/// [`crate::nb::panel`]), and what the kinds are called in messages.
pub(crate) const FIT_FILE_MAGIC: &[u8; 8] = b"WISPFIT1";
pub(crate) const FIT_KIND: &str = "a fit's checkpoint";
const BOOTSTRAP_KIND: &str = "a bootstrap's checkpoint";

/// Every kind's file magic and name, so that a file of one kind given for
/// another is named as what it is.
const KINDS: &[(&[u8; 8], &str)] = &[(FILE_MAGIC, BOOTSTRAP_KIND), (FIT_FILE_MAGIC, FIT_KIND)];

impl Record for Entry {
    const FILE_MAGIC: &'static [u8; 8] = FILE_MAGIC;
    const OLDER_MAGICS: &'static [(&'static [u8; 8], &'static str)] = OLDER_MAGICS;
    const FRAME_MAGIC: &'static [u8; 4] = FRAME_MAGIC;
    const KIND: &'static str = BOOTSTRAP_KIND;
}

/// One finished replicate, as stored in a frame.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Entry {
    /// Fingerprint of the bootstrap plan (the fit) the replicate belongs to.
    pub(crate) plan_hash: u64,
    /// The bootstrap seed, as R gave it.
    pub(crate) seed: f64,
    pub(crate) outcome: Outcome,
}

/// A stretch of a checkpoint file that held no valid frame.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Damage {
    /// Byte offset in the file.
    pub(crate) offset: u64,
    pub(crate) length: u64,
    /// Whether the stretch runs to the end of the file (a cut-short tail).
    pub(crate) at_end: bool,
}

/// What a reader found in a checkpoint file.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Contents<R = Entry> {
    pub(crate) entries: Vec<R>,
    pub(crate) damage: Vec<Damage>,
    /// Whether the file existed (with at least part of its magic).
    pub(crate) existed: bool,
}

impl<R> Default for Contents<R> {
    fn default() -> Self {
        Contents {
            entries: Vec::new(),
            damage: Vec::new(),
            existed: false,
        }
    }
}

/// The bytes of one frame holding `entry`.
pub(crate) fn encode_entry<R: Record>(entry: &R) -> Result<Vec<u8>, String> {
    let payload = bincode::serde::encode_to_vec(entry, bincode::config::standard())
        .map_err(|e| format!("cannot encode a checkpoint entry: {e}"))?;
    Ok(encode_frame(R::FRAME_MAGIC, &payload))
}

/// The entry in the frame starting at `bytes[0]`, and the frame's length;
/// `None` when there is no valid frame there.
fn frame_at<R: Record>(bytes: &[u8]) -> Option<(R, usize)> {
    let (payload, end) = frame_payload(R::FRAME_MAGIC, bytes, MAX_PAYLOAD_BYTES).ok()?;
    let entry = crate::codec::decode_exact::<R>(payload, "a checkpoint entry").ok()?;
    Some((entry, end))
}

fn find_magic(bytes: &[u8], from: usize, magic: &[u8; 4]) -> Option<usize> {
    bytes
        .get(from..)?
        .windows(magic.len())
        .position(|w| w == magic)
        .map(|at| from + at)
}

/// Parses the frames of a checkpoint file's bytes (after its magic), which
/// start at byte `base` of the file.
pub(crate) fn parse_frames<R: Record>(bytes: &[u8], base: u64) -> (Vec<R>, Vec<Damage>) {
    let mut entries = Vec::new();
    let mut damage = Vec::new();
    let mut at = 0usize;
    let mut damaged_since: Option<usize> = None;
    while at < bytes.len() {
        if let Some((entry, length)) = frame_at::<R>(&bytes[at..]) {
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
        match find_magic(bytes, at + 1, R::FRAME_MAGIC) {
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
pub(crate) enum CheckpointError {
    /// The file exists but is not a wispack checkpoint; it is left alone.
    NotCheckpoint(String),
    /// The file is a checkpoint of an older format (path, who wrote it); it is left alone.
    OlderFormat(String, &'static str),
    /// The file is a checkpoint of another kind (path, what it is, what was wanted).
    OtherKind(String, &'static str, &'static str),
    /// The path names something other than a regular file (a device, say).
    NotRegularFile(String),
    Io(String),
}

impl std::fmt::Display for CheckpointError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CheckpointError::NotCheckpoint(path) => write!(
                f,
                "'{path}' exists and is not a wispack checkpoint (it was left unchanged)"
            ),
            CheckpointError::OlderFormat(path, writer) => write!(
                f,
                "'{path}' is a checkpoint written by {writer}, whose format this version \
                 cannot read (it was left unchanged); use a new path, or delete the file"
            ),
            CheckpointError::OtherKind(path, what, wanted) => write!(
                f,
                "'{path}' is {what}, not {wanted} (it was left unchanged); use a new path"
            ),
            CheckpointError::NotRegularFile(path) => write!(f, "'{path}' is not a regular file"),
            CheckpointError::Io(message) => f.write_str(message),
        }
    }
}

impl From<CheckpointError> for Error {
    fn from(error: CheckpointError) -> Self {
        match error {
            CheckpointError::Io(_) => Error::system(error.to_string()),
            _ => Error::input(error.to_string()),
        }
    }
}

fn io_error(what: &str, path: &Path, error: std::io::Error) -> CheckpointError {
    CheckpointError::Io(format!("cannot {what} '{}': {error}", path.display()))
}

/// Reads a bootstrap's checkpoint file; a missing file is empty.
#[cfg(test)]
pub(crate) fn read(path: &Path) -> Result<Contents, CheckpointError> {
    read_records::<Entry>(path)
}

/// Reads a checkpoint file of records `R`; a missing file is empty.
pub(crate) fn read_records<R: Record>(path: &Path) -> Result<Contents<R>, CheckpointError> {
    let mut bytes = Vec::new();
    match File::open(path) {
        Ok(mut file) => {
            let metadata = file.metadata().map_err(|e| io_error("inspect", path, e))?;
            if !metadata.is_file() {
                // A device such as /dev/zero would never end.
                return Err(CheckpointError::NotRegularFile(path.display().to_string()));
            }
            file.read_to_end(&mut bytes)
                .map_err(|e| io_error("read", path, e))?;
        }
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Contents::default()),
        Err(e) => return Err(io_error("open", path, e)),
    }
    let magic = R::FILE_MAGIC;
    let magic_len = bytes.len().min(magic.len());
    if bytes[..magic_len] != magic[..magic_len] {
        if let Some((_, writer)) = R::OLDER_MAGICS
            .iter()
            .find(|(m, _)| bytes.starts_with(&m[..]))
        {
            return Err(CheckpointError::OlderFormat(
                path.display().to_string(),
                writer,
            ));
        }
        if let Some((_, what)) = KINDS.iter().find(|(m, _)| bytes.starts_with(&m[..])) {
            return Err(CheckpointError::OtherKind(
                path.display().to_string(),
                what,
                R::KIND,
            ));
        }
        return Err(CheckpointError::NotCheckpoint(path.display().to_string()));
    }
    if bytes.len() < magic.len() {
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
    let (entries, damage) = parse_frames::<R>(&bytes[magic.len()..], magic.len() as u64);
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
    crate::platform::sync_directory(&directory).map_err(|e| io_error("sync", &directory, e))
}

/// Writes a complete checkpoint holding `entries` to `path`, atomically
/// (temporary file, fsync, rename, fsync of the directory).
fn write_whole<R: Record>(path: &Path, entries: &[R]) -> Result<(), CheckpointError> {
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(format!(".tmp{}", std::process::id()));
    let temporary = PathBuf::from(temporary);
    let result = (|| {
        let mut bytes = R::FILE_MAGIC.to_vec();
        for entry in entries {
            bytes.extend(encode_entry(entry).map_err(CheckpointError::Io)?);
        }
        {
            // Closed before the rename, which Windows may refuse for an open file.
            let mut file =
                File::create(&temporary).map_err(|e| io_error("create", &temporary, e))?;
            file.write_all(&bytes)
                .map_err(|e| io_error("write", &temporary, e))?;
            file.sync_all()
                .map_err(|e| io_error("sync", &temporary, e))?;
        }
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
pub(crate) fn open(path: &Path) -> Result<Contents, CheckpointError> {
    open_records::<Entry>(path)
}

/// [`open`] for a checkpoint file of records `R`.
pub(crate) fn open_records<R: Record>(path: &Path) -> Result<Contents<R>, CheckpointError> {
    let contents = read_records::<R>(path)?;
    if !contents.existed || !contents.damage.is_empty() {
        write_whole(path, &contents.entries)?;
    }
    Ok(contents)
}

/// Appends frames to a checkpoint file, durably.
pub(crate) struct Appender {
    file: File,
    path: PathBuf,
}

impl Appender {
    /// Opens an existing checkpoint (made by [`open`]) for appending.
    pub(crate) fn new(path: &Path) -> Result<Self, CheckpointError> {
        let file = OpenOptions::new()
            // Windows locks only handles that may read or write, and an
            // append-only handle may do neither.
            .read(true)
            .append(true)
            .open(path)
            .map_err(|e| io_error("open", path, e))?;
        Ok(Appender {
            file,
            path: path.to_path_buf(),
        })
    }

    /// Appends one entry and returns once it is on disk.
    pub(crate) fn append<R: Record>(&mut self, entry: &R) -> Result<(), CheckpointError> {
        let frame = encode_entry(entry).map_err(CheckpointError::Io)?;
        let lock = crate::platform::lock_exclusive(&self.file)
            .map_err(|e| io_error("lock", &self.path, e))?;
        let written = (&self.file)
            .write_all(&frame)
            .and_then(|()| self.file.sync_data());
        drop(lock);
        written.map_err(|e| io_error("append to", &self.path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::frame_header_bytes;
    use crate::outcome::{FitSummary, ProcessStats};

    fn entry(replicate: u32, parameters: usize) -> Entry {
        Entry {
            plan_hash: 0xfeed,
            seed: 7.0,
            outcome: Outcome {
                replicate: replicate as usize,
                fit: Ok(FitSummary {
                    parameters: (0..parameters).map(|i| i as f64 + 0.5).collect(),
                    objective: 1.5,
                    nll: 1.25,
                    code: "converged".into(),
                    converged: true,
                    iterations: 12,
                    evaluations: 17,
                    max_gradient: 0.01,
                    on_bound: 0,
                    seconds: 0.05,
                }),
                process: ProcessStats {
                    seconds: Some(0.1),
                    pid: Some(42),
                    peak_rss_mb: None,
                    pss_mb: Some(3.0),
                    private_dirty_mb: None,
                },
            },
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
        let frame_len = encode_entry(&entries[0]).unwrap().len();
        let third = FILE_MAGIC.len() + 2 * frame_len;
        // A flipped payload byte, a flipped length byte, a flipped magic byte.
        for offset in [
            third + frame_header_bytes(FRAME_MAGIC) + 5,
            third + 6,
            third + 1,
        ] {
            let mut bytes = clean.clone();
            bytes[offset] ^= 0x5a;
            std::fs::write(&path, &bytes).unwrap();
            let contents = read(&path).unwrap();
            let replicates: Vec<usize> = contents
                .entries
                .iter()
                .map(|e| e.outcome.replicate)
                .collect();
            assert_eq!(replicates, vec![1, 2, 4, 5], "offset {offset}");
            assert_eq!(contents.damage.len(), 1);
            assert!(!contents.damage[0].at_end);
            assert_eq!(contents.damage[0].offset, third as u64);
        }
        // Garbage appended after a crash, then more frames: all good frames survive.
        let mut bytes = clean.clone();
        bytes.extend_from_slice(b"WCKF\xff\xff garbage");
        bytes.extend(encode_entry(&entry(6, 30)).unwrap());
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(read(&path).unwrap().entries.len(), 6);
        done(&path);
    }

    #[cfg(unix)]
    #[test]
    fn devices_are_refused() {
        assert!(matches!(
            read(Path::new("/dev/zero")),
            Err(CheckpointError::NotRegularFile(_))
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
        // A checkpoint of the previous format is refused, and left alone.
        let older = b"WISPCKP1WCKF\x05\x00";
        std::fs::write(&path, older).unwrap();
        let error = open(&path).unwrap_err();
        assert!(matches!(error, CheckpointError::OlderFormat(..)));
        assert!(error.to_string().contains("wispack 0.1.0"), "{error}");
        assert_eq!(std::fs::read(&path).unwrap(), older);
        // A file cut short inside its magic is an empty checkpoint.
        std::fs::write(&path, &FILE_MAGIC[..3]).unwrap();
        let contents = open(&path).unwrap();
        assert!(contents.entries.is_empty());
        assert_eq!(std::fs::read(&path).unwrap(), FILE_MAGIC);
        done(&path);
    }

    #[cfg(unix)]
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

    /// The lock holds between handles of one process too (threads here, the
    /// way `future` workers on one machine share a file on Windows).
    #[test]
    fn appenders_on_separate_handles_never_interleave() {
        let path = scratch("threads");
        open(&path).unwrap();
        std::thread::scope(|scope| {
            for writer in 0..4u32 {
                let path = &path;
                scope.spawn(move || {
                    let mut appender = Appender::new(path).unwrap();
                    for r in 0..25 {
                        appender.append(&entry(writer * 100 + r, 2000)).unwrap();
                    }
                });
            }
        });
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
