//! One source's state file: read back whole and checked, or replaced atomically.

use super::format::{self, StateError};
use super::Source;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The file of one source, with what a file must say to be served.
#[derive(Debug)]
pub(crate) struct StateFile {
    path: PathBuf,
    source: Source,
    /// What names the data's origin: a file written for another one is foreign.
    identity: String,
    max_age: Duration,
}

/// Data read back from a state file.
#[derive(Debug)]
pub(crate) struct Restored {
    /// When the data was current.
    pub(crate) written: SystemTime,
    /// The source's data.
    pub(crate) data: Vec<u8>,
}

impl StateFile {
    pub(super) fn new(path: PathBuf, source: Source, identity: String, max_age: Duration) -> StateFile {
        StateFile {
            path,
            source,
            identity,
            max_age,
        }
    }

    /// Where the file is.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Whose data it holds.
    pub(crate) fn source(&self) -> Source {
        self.source
    }

    /// The data, if the file is there, intact, this source's and young enough at `now`.
    pub(crate) fn read(&self, now: SystemTime) -> Result<Restored, StateError> {
        let mut bytes = match std::fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(StateError::Missing),
            Err(e) => return Err(StateError::Read(e)),
        };
        let (written, data) = format::decode(&bytes, self.source, &self.identity, self.max_age, now)?;
        let data_at = bytes.len() - data.len();
        bytes.drain(..data_at);
        Ok(Restored { written, data: bytes })
    }

    /// Replaces the file with `data`, current at `written`: written to a temporary file in the
    /// same directory, synced, renamed over the file and the directory synced, so that a crash
    /// at any point leaves the old file or the new one whole. Readable by the owner only: the
    /// data may name every service of the site.
    pub(crate) fn write(&self, data: &[u8], written: SystemTime) -> io::Result<()> {
        self.sweep();
        let temporary = self.temporary(std::process::id());
        let result = self.write_through(&temporary, data, written);
        if result.is_err() {
            let _ = std::fs::remove_file(&temporary);
        }
        result
    }

    fn write_through(&self, temporary: &Path, data: &[u8], written: SystemTime) -> io::Result<()> {
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(temporary)?;
        file.write_all(&format::prefix(self.source, &self.identity, written, data))?;
        file.write_all(data)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(temporary, &self.path)?;
        File::open(self.dir())?.sync_all()
    }

    fn dir(&self) -> &Path {
        match self.path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        }
    }

    /// The temporary file of the process `pid`: each process its own, so that the two processes
    /// of an in-place upgrade never write into one file.
    fn temporary(&self, pid: u32) -> PathBuf {
        let mut name = self.path.file_name().unwrap_or_default().to_os_string();
        name.push(format!(".{pid}.tmp"));
        self.path.with_file_name(name)
    }

    /// Removes the temporary files that processes no longer running left behind (killed in the
    /// middle of a write). Where `/proc` is not mounted, no process can be told dead and nothing
    /// is removed.
    fn sweep(&self) {
        if !Path::new("/proc/self").exists() {
            return;
        }
        let (Some(name), Ok(entries)) = (self.path.file_name(), std::fs::read_dir(self.dir())) else {
            return;
        };
        let name = name.to_string_lossy();
        for entry in entries.flatten() {
            let file = entry.file_name();
            let pid = file
                .to_str()
                .and_then(|f| f.strip_prefix(name.as_ref()))
                .and_then(|f| f.strip_prefix('.'))
                .and_then(|f| f.strip_suffix(".tmp"))
                .and_then(|pid| pid.parse::<u32>().ok());
            if let Some(pid) = pid.filter(|&pid| pid != std::process::id()) {
                if !Path::new("/proc").join(pid.to_string()).exists() {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(86_400);

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_write_reads_back_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = StateFile::new(dir.path().join("etcd.state"), Source::Etcd, "id".into(), DAY);
        assert!(matches!(file.read(SystemTime::now()), Err(StateError::Missing)));
        let now = SystemTime::now();
        file.write(b"first", now).unwrap();
        file.write(b"second", now).unwrap();
        let restored = file.read(now).unwrap();
        assert_eq!(restored.data, b"second");
        assert_eq!(names(dir.path()), ["etcd.state"]);
        let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(file.path()).unwrap().permissions());
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn temporary_files_of_dead_processes_are_swept_and_others_kept() {
        let dir = tempfile::tempdir().unwrap();
        let file = StateFile::new(dir.path().join("etcd.state"), Source::Etcd, "id".into(), DAY);
        // PID 1 runs on any Linux system; a PID above the kernel's limit never does.
        let dead = file.temporary(u32::MAX - 1);
        let alive = file.temporary(1);
        std::fs::write(&dead, b"half").unwrap();
        std::fs::write(&alive, b"half").unwrap();
        std::fs::write(dir.path().join("other.1.tmp"), b"x").unwrap();
        file.write(b"data", SystemTime::now()).unwrap();
        let expected = ["etcd.state", "etcd.state.1.tmp", "other.1.tmp"];
        assert_eq!(names(dir.path()), expected);
    }

    #[test]
    fn a_write_into_a_missing_directory_fails_without_a_trace() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("gone");
        let file = StateFile::new(missing.join("etcd.state"), Source::Etcd, "id".into(), DAY);
        assert!(file.write(b"data", SystemTime::now()).is_err());
        assert!(!missing.exists());
    }

    #[test]
    fn a_file_of_another_identity_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("etcd.state");
        let now = SystemTime::now();
        StateFile::new(path.clone(), Source::Etcd, "one".into(), DAY)
            .write(b"data", now)
            .unwrap();
        let other = StateFile::new(path, Source::Etcd, "two".into(), DAY);
        assert!(matches!(other.read(now), Err(StateError::Foreign { .. })));
    }
}
