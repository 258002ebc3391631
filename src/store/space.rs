//! Keeping the store writable on a filling disk. sled treats a failed
//! write as fatal for the process (every later operation fails until a
//! restart), so the store never lets the disk run out under it: a ballast
//! file holds back some space, every flush looks at the free space first,
//! and once it runs low the ballast goes (so the pauses that follow can be
//! recorded), terminal output stops being recorded, and the server pauses
//! running sessions until there is room again.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Space held back by the ballast file.
const BALLAST_BYTES: u64 = 32 * 1024 * 1024;
/// Below this much free space (without the ballast) the disk is low.
const LOW_BYTES: u64 = 16 * 1024 * 1024;
/// Above this much free space it is fine again (and the ballast comes back).
const RECOVERED_BYTES: u64 = BALLAST_BYTES + 2 * LOW_BYTES;

pub struct SpaceGuard {
    dir: PathBuf,
    ballast: PathBuf,
    low: AtomicBool,
    free: AtomicU64,
}

impl SpaceGuard {
    /// A guard for the store in `dir`; lays the ballast when there is room.
    pub fn new(dir: &Path) -> SpaceGuard {
        let guard = SpaceGuard {
            dir: dir.to_path_buf(),
            ballast: dir.join("ballast"),
            low: AtomicBool::new(false),
            free: AtomicU64::new(u64::MAX),
        };
        guard.check();
        guard
    }

    /// Looks at the free space, drops or lays the ballast, and returns
    /// whether the disk is low now.
    pub fn check(&self) -> bool {
        self.check_knowing(self.ballast.exists())
    }

    /// `check` where it cannot block: `None` (nothing done) when it might
    /// have to write the ballast back, which is left to `check`.
    pub fn check_in_place(&self) -> Option<bool> {
        let ballast_present = self.ballast.exists();
        (ballast_present && !self.is_low()).then(|| self.check_knowing(true))
    }

    fn check_knowing(&self, ballast_present: bool) -> bool {
        let Some(free) = free_bytes(&self.dir) else {
            return false;
        };
        self.free.store(free, Ordering::Relaxed);
        if free < LOW_BYTES {
            if ballast_present && std::fs::remove_file(&self.ballast).is_ok() {
                tracing::error!(free, "the disk is almost full: the ballast is released");
            }
            if !self.low.swap(true, Ordering::AcqRel) {
                tracing::error!(
                    free,
                    "the disk is almost full: terminal output is not recorded and running sessions pause"
                );
            }
            return true;
        }
        if self.low.load(Ordering::Acquire) {
            if free < RECOVERED_BYTES {
                return true;
            }
            tracing::warn!(free, "there is room on the disk again");
            self.low.store(false, Ordering::Release);
        }
        if !ballast_present && free >= RECOVERED_BYTES {
            lay_ballast(&self.ballast);
        }
        false
    }

    /// Whether the disk was low at the last check.
    pub fn is_low(&self) -> bool {
        self.low.load(Ordering::Acquire)
    }

    /// Free bytes at the last check.
    pub fn free(&self) -> u64 {
        self.free.load(Ordering::Relaxed)
    }
}

fn free_bytes(dir: &Path) -> Option<u64> {
    let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).ok()?;
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: statvfs with a NUL-terminated path and a pointer to a zeroed struct.
    if unsafe { libc::statvfs(path.as_ptr(), &mut stat) } != 0 {
        return None;
    }
    Some((stat.f_bavail as u64).saturating_mul(stat.f_frsize as u64))
}

/// Allocates the ballast for real (a sparse file would hold nothing back).
fn lay_ballast(path: &Path) {
    let Ok(file) = std::fs::File::create(path) else {
        return;
    };
    let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
    // SAFETY: posix_fallocate on an open, writable descriptor.
    let failed = unsafe { libc::posix_fallocate(fd, 0, BALLAST_BYTES as libc::off_t) } != 0;
    if failed {
        drop(file);
        let _ = std::fs::remove_file(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_roomy_disk_gets_its_ballast_and_is_not_low() {
        let dir = tempfile::tempdir().unwrap();
        let guard = SpaceGuard::new(dir.path());
        if guard.free() < RECOVERED_BYTES + BALLAST_BYTES {
            eprintln!("SKIPPED: too little free space here to test the ballast");
            return;
        }
        assert!(!guard.is_low());
        let ballast = std::fs::metadata(dir.path().join("ballast")).unwrap();
        assert_eq!(ballast.len(), BALLAST_BYTES);
    }

    #[test]
    fn the_in_place_check_only_looks_and_leaves_laying_the_ballast_to_check() {
        let dir = tempfile::tempdir().unwrap();
        let guard = SpaceGuard::new(dir.path());
        if guard.free() < RECOVERED_BYTES + BALLAST_BYTES {
            eprintln!("SKIPPED: too little free space here to test the ballast");
            return;
        }
        assert_eq!(guard.check_in_place(), Some(false), "roomy, ballast laid");
        std::fs::remove_file(dir.path().join("ballast")).unwrap();
        assert_eq!(guard.check_in_place(), None, "it would have to write");
        assert!(!dir.path().join("ballast").exists(), "and it wrote nothing");
        assert!(!guard.check());
        assert!(dir.path().join("ballast").exists(), "check lays it back");
    }
}
