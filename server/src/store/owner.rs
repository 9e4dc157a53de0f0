//! One `herald serve` per SQLite file. The serving process holds an exclusive
//! advisory lock (`flock`) on the database file for as long as it runs; the
//! kernel drops it when the process exits, however it exits. So a process that
//! holds it knows that every lease in the file was taken by a process that is
//! gone, and takes them back at start instead of waiting out their lease.
//! SQLite's own locks are POSIX record locks, which `flock` does not touch, so
//! `herald backup` and other readers are unaffected.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum OwnerError {
    #[error(
        "{0} is served by another herald process; only one may serve a SQLite database \
         (stop the other one, or use PostgreSQL to run several)"
    )]
    Taken(PathBuf),
    #[error("{path}: cannot lock the database file: {message}")]
    Lock { path: PathBuf, message: String },
}

/// The lock on a SQLite database file, held until dropped.
#[derive(Debug)]
pub struct FileOwner {
    _file: File,
}

/// Takes the SQLite database file at `path` for this process (creating it
/// empty if need be, as SQLite would).
pub fn own(path: &Path) -> Result<FileOwner, OwnerError> {
    let fail = |message: String| OwnerError::Lock { path: path.to_path_buf(), message };
    let file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path);
    let file = file.map_err(|e| fail(e.to_string()))?;
    match file.try_lock() {
        Ok(()) => Ok(FileOwner { _file: file }),
        Err(std::fs::TryLockError::WouldBlock) => Err(OwnerError::Taken(path.to_path_buf())),
        Err(std::fs::TryLockError::Error(e)) => Err(fail(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_has_one_owner_until_it_lets_go() {
        let path = std::env::temp_dir().join(format!("herald-owner-{}.db", crate::ids::new_id("t")));
        let first = own(&path).unwrap();
        let refused = own(&path).unwrap_err();
        assert!(matches!(refused, OwnerError::Taken(_)));
        assert!(refused.to_string().contains(&path.display().to_string()), "names the file: {refused}");
        drop(first);
        assert!(own(&path).is_ok(), "free again once the owner is gone");
        std::fs::remove_file(&path).unwrap();
    }
}
