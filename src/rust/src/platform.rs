//! What differs between operating systems, in one place. The crate builds on
//! Linux, macOS and Windows:
//!
//! - fork: the engine's process workers (`engine/fork.rs`) exist on Unix
//!   (Linux, macOS); on Windows the engine runs tasks on threads
//!   (`engine/threads.rs`), and R offers the bootstrap backends that need no
//!   fork ([`FORK`]);
//! - memory: the per-process memory figures are read from `/proc`, so they
//!   exist on Linux only (`engine/procmem.rs`), and so does the per-worker
//!   memory limit ([`MEMORY_LIMIT`]);
//! - file locks and durable renames for checkpoints: [`lock_exclusive`] and
//!   [`sync_directory`];
//! - ending the process at once, for fault injection in tests: [`kill_self`].

use std::fs::File;
use std::io;
use std::path::Path;

/// Whether this platform can fork worker processes.
pub(crate) const FORK: bool = cfg!(unix);

/// Whether worker processes can be given a memory limit: it is set as
/// `RLIMIT_AS` above the address space read from `/proc/self/status` (Linux;
/// macOS has no such file and does not enforce `RLIMIT_AS`).
pub(crate) const MEMORY_LIMIT: bool = cfg!(target_os = "linux");

/// Whether the memory columns (peak RSS, PSS, private dirty) are reported.
pub(crate) const MEMORY_FIGURES: bool = cfg!(target_os = "linux");

/// Whether `bytes` of memory can be had by this process now: reserved (not
/// touched, so it costs no memory) and given back at once. It fails where
/// the address-space limit (`RLIMIT_AS`) or the kernel's overcommit rule
/// would refuse the allocation, so a large allocation can be checked before
/// it is made instead of aborting the process when it fails.
pub(crate) fn can_allocate(bytes: u64) -> bool {
    let Ok(bytes) = usize::try_from(bytes) else {
        return false;
    };
    Vec::<u8>::new().try_reserve_exact(bytes).is_ok()
}

/// An exclusive lock on an open file, released when dropped (or when the
/// file is closed). Other processes that lock the same file wait.
pub(crate) struct FileLock<'a> {
    file: &'a File,
}

/// Locks the whole of `file` exclusively, waiting for other holders.
///
/// Unix: `flock`. Windows: `LockFileEx` over every byte; the handle needs
/// read or write access (an append-only handle is refused by Windows), and
/// the lock is mandatory there, so other handles cannot read or write the
/// file while it is held. The standard library's `File::lock` would do this
/// from Rust 1.89 on, above this crate's minimum (1.85); the lock crates
/// pull in `windows-sys` or `winapi`, which would take the vendored crates
/// over CRAN's 5 MB, so the two calls are declared here.
pub(crate) fn lock_exclusive(file: &File) -> io::Result<FileLock<'_>> {
    sys::lock(file)?;
    Ok(FileLock { file })
}

impl Drop for FileLock<'_> {
    fn drop(&mut self) {
        sys::unlock(self.file);
    }
}

/// Makes a rename in `directory` durable: `fsync` of the directory on Unix.
/// Windows cannot open a directory as a file; NTFS journals the rename
/// itself, so there is nothing to do.
pub(crate) fn sync_directory(directory: &Path) -> io::Result<()> {
    if cfg!(unix) {
        File::open(directory)?.sync_all()
    } else {
        Ok(())
    }
}

/// Ends this process at once, as `kill -9` would: no unwinding, no exit
/// handlers. For fault injection in tests.
#[cfg(feature = "test-hooks")]
pub(crate) fn kill_self() -> ! {
    #[cfg(unix)]
    // SAFETY: raising a signal against ourselves has no memory-safety effect.
    unsafe {
        libc::raise(libc::SIGKILL);
    }
    std::process::abort()
}

#[cfg(unix)]
mod sys {
    use std::fs::File;
    use std::io;
    use std::os::fd::AsRawFd;

    pub(super) fn lock(file: &File) -> io::Result<()> {
        // SAFETY: flock on a descriptor the caller keeps open.
        while unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            let error = io::Error::last_os_error();
            if error.kind() != io::ErrorKind::Interrupted {
                return Err(error);
            }
        }
        Ok(())
    }

    pub(super) fn unlock(file: &File) {
        // SAFETY: as above.
        unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_UN) };
    }
}

#[cfg(windows)]
mod sys {
    use std::ffi::c_void;
    use std::fs::File;
    use std::io;
    use std::os::windows::io::AsRawHandle;

    /// `OVERLAPPED` of the Windows API: the offset of the locked range
    /// (0) in `offset`/`offset_high`.
    #[repr(C)]
    struct Overlapped {
        internal: usize,
        internal_high: usize,
        offset: u32,
        offset_high: u32,
        event: *mut c_void,
    }

    const LOCKFILE_EXCLUSIVE_LOCK: u32 = 0x2;

    #[link(name = "kernel32")]
    extern "system" {
        fn LockFileEx(
            file: *mut c_void,
            flags: u32,
            reserved: u32,
            bytes_low: u32,
            bytes_high: u32,
            overlapped: *mut Overlapped,
        ) -> i32;
        fn UnlockFileEx(
            file: *mut c_void,
            reserved: u32,
            bytes_low: u32,
            bytes_high: u32,
            overlapped: *mut Overlapped,
        ) -> i32;
    }

    fn whole_file() -> Overlapped {
        Overlapped {
            internal: 0,
            internal_high: 0,
            offset: 0,
            offset_high: 0,
            event: std::ptr::null_mut(),
        }
    }

    pub(super) fn lock(file: &File) -> io::Result<()> {
        let mut overlapped = whole_file();
        // SAFETY: a synchronous handle the caller keeps open; the call blocks
        // until the lock is granted and does not keep `overlapped`.
        let granted = unsafe {
            LockFileEx(
                file.as_raw_handle(),
                LOCKFILE_EXCLUSIVE_LOCK,
                0,
                u32::MAX,
                u32::MAX,
                &mut overlapped,
            )
        };
        if granted == 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    pub(super) fn unlock(file: &File) {
        let mut overlapped = whole_file();
        // SAFETY: as above; the range is the one locked.
        unsafe { UnlockFileEx(file.as_raw_handle(), 0, u32::MAX, u32::MAX, &mut overlapped) };
    }
}
