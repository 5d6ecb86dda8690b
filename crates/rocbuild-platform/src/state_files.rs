//! Reading files that someone else may have planted: rocbuild's own state (its key, journals,
//! manifests) and a venv's files (RECORD, METADATA, `torch/version.py`). Each is opened
//! without following a link at its own name, without blocking (a FIFO or a device answers
//! "not a regular file" at once instead of waiting for a writer for ever), checked to be a
//! regular file, and read with a size cap. And the identity of a directory that a copy of it
//! does not carry, which binds rocbuild's state to one venv rather than to a path.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::path::Path;

/// Caps for what rocbuild reads back (far above anything it writes, far below memory).
pub mod cap {
    /// A journal or a manifest: a few KB each, a few MB for a package of thousands of files.
    pub const STATE: u64 = 64 << 20;
    /// A dist-info `RECORD` (torch's is ~2 MB) or `METADATA`.
    pub const RECORD: u64 = 64 << 20;
    /// A small text file of a package (`torch/version.py` is under 1 KB, a `.pth` file).
    pub const SMALL_TEXT: u64 = 1 << 20;
}

/// Open `p` for reading only when it is a regular file: never through a link at `p` itself,
/// never waiting on a FIFO or a device. A non-regular file is `InvalidInput`, naming what it is.
pub fn open_regular(p: &Path) -> io::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    #[cfg(not(unix))]
    if std::fs::symlink_metadata(p).is_ok_and(|m| crate::host::is_link(&m)) {
        return Err(not_regular("a link"));
    }
    let f = match o.open(p) {
        Ok(f) => f,
        #[cfg(unix)]
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(not_regular("a link")),
        Err(e) => return Err(e),
    };
    let md = f.metadata()?;
    if !md.is_file() {
        return Err(not_regular(kind_of(&md)));
    }
    Ok(blocking(f))
}

/// Open `p` for reading when it is, or a link at it leads to, a regular file (a library a
/// loader would follow a link to): never waiting on a FIFO or a device, which are refused
/// at once as `InvalidInput`.
pub fn open_file(p: &Path) -> io::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    let f = o.open(p)?;
    let md = f.metadata()?;
    if !md.is_file() {
        return Err(not_regular(kind_of(&md)));
    }
    Ok(blocking(f))
}

/// The descriptor back in blocking mode (reads of a regular file never block anyway).
fn blocking(f: File) -> File {
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: fcntl on a descriptor we own, with flags we read from it first.
        unsafe {
            let fl = libc::fcntl(f.as_raw_fd(), libc::F_GETFL);
            if fl >= 0 {
                libc::fcntl(f.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK);
            }
        }
    }
    f
}

/// The whole of the regular file `p` (links followed) when it holds at most `cap` bytes.
pub fn read_file_capped(p: &Path, cap: u64) -> io::Result<Vec<u8>> {
    read_capped_from(open_file(p)?, cap)
}

/// As [`read_file_capped`], as UTF-8 text.
pub fn read_file_capped_text(p: &Path, cap: u64) -> io::Result<String> {
    String::from_utf8(read_file_capped(p, cap)?)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "it is not UTF-8 text"))
}

/// The whole of the regular file `p` when it holds at most `cap` bytes (see [`open_regular`]);
/// a bigger one is `InvalidData`, naming its size and the cap, and is not read.
pub fn read_capped(p: &Path, cap: u64) -> io::Result<Vec<u8>> {
    read_capped_from(open_regular(p)?, cap)
}

fn read_capped_from(f: File, cap: u64) -> io::Result<Vec<u8>> {
    let len = f.metadata()?.len();
    if len > cap {
        return Err(too_big(len, cap));
    }
    let mut buf = Vec::with_capacity(len as usize);
    // A file that grows while it is read still stops at the cap.
    f.take(cap + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > cap {
        return Err(too_big(buf.len() as u64, cap));
    }
    Ok(buf)
}

/// As [`read_capped`], as UTF-8 text.
pub fn read_capped_text(p: &Path, cap: u64) -> io::Result<String> {
    String::from_utf8(read_capped(p, cap)?)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "it is not UTF-8 text"))
}

fn too_big(len: u64, cap: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("it holds {len} bytes, more than the {cap} rocbuild reads of such a file"),
    )
}

fn not_regular(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("it is {what}, not a regular file"),
    )
}

fn kind_of(md: &std::fs::Metadata) -> &'static str {
    let t = md.file_type();
    if t.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_char_device() || t.is_block_device() {
            return "a device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    "something other than a file"
}

/// What identifies the directory `p` itself, not its path: Unix its device, inode and birth
/// time (where the file system keeps one: an inode number reused after a removal gets a new
/// one); Windows its volume serial number and 64-bit file index (NTFS's file reference number,
/// whose sequence number changes when a record is reused). A rename keeps all of them; a copy
/// (`cp -r`, a restored backup, a sibling venv renamed into this path) gets new ones, and
/// adding or removing entries in the directory (a pip install) changes none. Not Windows'
/// creation time: Wine reports the directory's change time as that, which every pip install
/// moves.
pub fn dir_identity(p: &Path) -> io::Result<Vec<u8>> {
    let md = std::fs::symlink_metadata(p)?;
    if !md.is_dir() {
        return Err(not_regular("not a directory, or a link"));
    }
    let mut out = Vec::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        out.extend_from_slice(b"unix\0");
        out.extend_from_slice(&md.dev().to_le_bytes());
        out.extend_from_slice(&md.ino().to_le_bytes());
    }
    #[cfg(windows)]
    {
        out.extend_from_slice(b"windows\0");
        out.extend_from_slice(&windows::file_id(p)?);
    }
    #[cfg(unix)]
    if let Ok(t) = md.created() {
        if let Ok(d) = t.duration_since(std::time::UNIX_EPOCH) {
            out.extend_from_slice(&d.as_nanos().to_le_bytes());
        }
    }
    Ok(out)
}

/// Refuse a secret key file (open as `f`, at `p`) that OpenSSH would refuse as a private key:
/// it must be a regular file of this user's, readable and writable by them alone (mode 0600
/// or stricter), with one link (a hard link elsewhere would let whoever can reach that name
/// read or replace it). `Err` says what is wrong and how to fix it. Windows: ACLs decide.
pub fn check_private_file(f: &File, p: &Path) -> Result<(), String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let md = f.metadata().map_err(|e| e.to_string())?;
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        let fix = format!(
            "remove it (`rm '{}'`): rocbuild makes a new one, and journals sealed with the old one are then reported, never replayed",
            p.display()
        );
        if md.uid() != me {
            return Err(format!(
                "it belongs to user id {}, not to you (user id {me}); {fix}",
                md.uid()
            ));
        }
        if md.mode() & 0o077 != 0 {
            return Err(format!(
                "its mode is {:o}: others may read or write it (OpenSSH refuses such a key too); run `chmod 600 '{}'` if no one else could have changed it, else {fix}",
                md.mode() & 0o777,
                p.display()
            ));
        }
        if md.nlink() != 1 {
            return Err(format!(
                "it has {} hard links: another name reaches the same key; {fix}",
                md.nlink()
            ));
        }
        Ok(())
    }
    #[cfg(not(unix))]
    {
        let _ = (f, p);
        Ok(())
    }
}

/// A directory of rocbuild's state, held open: files are created, renamed and removed in
/// *this* directory, whatever its path names later (Unix: `openat`/`renameat` on a descriptor
/// opened with `O_NOFOLLOW`). A process that swaps the directory's name for a link while
/// rocbuild works cannot make it create a file where the link points. Elsewhere: the path,
/// with a link at it refused when it is opened.
pub struct HeldDir {
    path: std::path::PathBuf,
    #[cfg(unix)]
    fd: std::os::fd::OwnedFd,
}

impl HeldDir {
    /// Hold the directory at `path`, which must be a real directory (not a link).
    pub fn open(path: &Path) -> io::Result<HeldDir> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            let f = OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
                .open(path)
                .map_err(|e| match e.raw_os_error() {
                    Some(libc::ELOOP) | Some(libc::ENOTDIR) => {
                        not_regular("a link or not a directory")
                    }
                    _ => e,
                })?;
            Ok(HeldDir {
                path: path.to_path_buf(),
                fd: f.into(),
            })
        }
        #[cfg(not(unix))]
        {
            let md = std::fs::symlink_metadata(path)?;
            if !md.is_dir() || crate::host::is_link(&md) {
                return Err(not_regular("a link or not a directory"));
            }
            Ok(HeldDir {
                path: path.to_path_buf(),
            })
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Create `name` (a plain name) in this directory, new: fails when anything is there,
    /// a link included. Mode 0644 less the umask, never writable by others.
    pub fn create_new(&self, name: &str) -> io::Result<File> {
        #[cfg(unix)]
        {
            use std::os::fd::{AsRawFd, FromRawFd};
            let c = std::ffi::CString::new(name).map_err(io::Error::other)?;
            // SAFETY: a descriptor we hold and a NUL-terminated name.
            let fd = unsafe {
                libc::openat(
                    self.fd.as_raw_fd(),
                    c.as_ptr(),
                    libc::O_WRONLY
                        | libc::O_CREAT
                        | libc::O_EXCL
                        | libc::O_NOFOLLOW
                        | libc::O_CLOEXEC,
                    0o644 as libc::c_uint,
                )
            };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: a descriptor openat just returned, owned from here on.
            let f = unsafe { File::from_raw_fd(fd) };
            use std::os::unix::fs::PermissionsExt;
            let mode = f.metadata()?.permissions().mode();
            if mode & 0o022 != 0 {
                f.set_permissions(std::fs::Permissions::from_mode(mode & !0o022))?;
            }
            Ok(f)
        }
        #[cfg(not(unix))]
        {
            let mut o = OpenOptions::new();
            o.write(true).create_new(true);
            crate::host::open_private(o, &self.path.join(name))
        }
    }

    /// Open `name` in this directory to read and write, made when missing, never through a
    /// link (a lock file). Windows: as [`crate::host::lock_file_options`] says.
    pub fn open_lock(&self, name: &str) -> io::Result<File> {
        #[cfg(unix)]
        {
            use std::os::fd::{AsRawFd, FromRawFd};
            let c = std::ffi::CString::new(name).map_err(io::Error::other)?;
            // SAFETY: a descriptor we hold and a NUL-terminated name.
            let fd = unsafe {
                libc::openat(
                    self.fd.as_raw_fd(),
                    c.as_ptr(),
                    libc::O_RDWR | libc::O_CREAT | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                    0o644 as libc::c_uint,
                )
            };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: a descriptor openat just returned, owned from here on.
            Ok(unsafe { File::from_raw_fd(fd) })
        }
        #[cfg(not(unix))]
        {
            let mut o = OpenOptions::new();
            o.read(true).write(true).create(true).truncate(false);
            crate::host::lock_file_options(&mut o);
            o.open(self.path.join(name))
        }
    }

    /// Rename `from` to `to`, both plain names in this directory (over what `to` names).
    pub fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            let (a, b) = (
                std::ffi::CString::new(from).map_err(io::Error::other)?,
                std::ffi::CString::new(to).map_err(io::Error::other)?,
            );
            let fd = self.fd.as_raw_fd();
            // SAFETY: a descriptor we hold and NUL-terminated names.
            if unsafe { libc::renameat(fd, a.as_ptr(), fd, b.as_ptr()) } != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        }
        #[cfg(not(unix))]
        {
            std::fs::rename(self.path.join(from), self.path.join(to))
        }
    }

    /// Remove the file `name` (a plain name) from this directory; a missing one is no error.
    pub fn remove(&self, name: &str) -> io::Result<()> {
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            let c = std::ffi::CString::new(name).map_err(io::Error::other)?;
            // SAFETY: a descriptor we hold and a NUL-terminated name.
            if unsafe { libc::unlinkat(self.fd.as_raw_fd(), c.as_ptr(), 0) } != 0 {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::NotFound {
                    return Err(e);
                }
            }
            Ok(())
        }
        #[cfg(not(unix))]
        {
            match std::fs::remove_file(self.path.join(name)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            }
        }
    }
}

#[cfg(windows)]
mod windows {
    use std::io;
    use std::path::Path;

    /// The volume serial number and the 64-bit file index of `p` (a directory).
    pub(super) fn file_id(p: &Path) -> io::Result<Vec<u8>> {
        use std::os::windows::fs::OpenOptionsExt;
        use std::os::windows::io::AsRawHandle;
        const FILE_FLAG_BACKUP_SEMANTICS: u32 = 0x0200_0000;
        const FILE_FLAG_OPEN_REPARSE_POINT: u32 = 0x0020_0000;
        #[repr(C)]
        #[derive(Default)]
        struct Info {
            attributes: u32,
            created: [u32; 2],
            accessed: [u32; 2],
            written: [u32; 2],
            volume_serial: u32,
            size_high: u32,
            size_low: u32,
            links: u32,
            index_high: u32,
            index_low: u32,
        }
        #[link(name = "kernel32")]
        extern "system" {
            fn GetFileInformationByHandle(h: *mut std::ffi::c_void, info: *mut Info) -> i32;
        }
        let f = std::fs::OpenOptions::new()
            .access_mode(0)
            .custom_flags(FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT)
            .open(p)?;
        let mut info = Info::default();
        // SAFETY: a valid handle we own and a struct laid out as BY_HANDLE_FILE_INFORMATION
        // (each FILETIME is two u32 halves).
        let ok = unsafe { GetFileInformationByHandle(f.as_raw_handle(), &mut info) };
        if ok == 0 {
            return Err(io::Error::last_os_error());
        }
        let mut out = Vec::new();
        out.extend_from_slice(&info.volume_serial.to_le_bytes());
        out.extend_from_slice(&info.index_high.to_le_bytes());
        out.extend_from_slice(&info.index_low.to_le_bytes());
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pip install adds and removes entries of site-packages: the directory is the same
    /// one, and its state stays rocbuild's. A copy is another directory.
    #[test]
    fn a_directory_keeps_its_identity_when_entries_come_and_go_and_a_copy_has_another() {
        let d = tempfile::tempdir().unwrap();
        let site = d.path().join("site-packages");
        std::fs::create_dir(&site).unwrap();
        let before = dir_identity(&site).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::create_dir(site.join("torch")).unwrap();
        std::fs::write(site.join("torch").join("version.py"), "v").unwrap();
        std::fs::write(site.join("a.pth"), "x").unwrap();
        std::fs::remove_file(site.join("a.pth")).unwrap();
        assert_eq!(dir_identity(&site).unwrap(), before);
        let moved = d.path().join("moved");
        std::fs::rename(&site, &moved).unwrap();
        assert_eq!(dir_identity(&moved).unwrap(), before);
        std::fs::create_dir(&site).unwrap();
        assert_ne!(dir_identity(&site).unwrap(), before);
    }

    #[test]
    fn a_regular_file_is_read_up_to_its_cap_and_no_further() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, b"0123456789").unwrap();
        assert_eq!(read_capped(&p, 10).unwrap(), b"0123456789");
        let e = read_capped(&p, 9).unwrap_err();
        assert!(e.to_string().contains("10 bytes"), "{e}");
        // (Windows refuses to open a directory as a file at all.)
        #[cfg(unix)]
        {
            let e = read_capped(d.path(), 9).unwrap_err();
            assert!(e.to_string().contains("a directory"), "{e}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_a_device_and_a_link_are_refused_without_blocking() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // Without O_NONBLOCK this open would wait for a writer for ever.
        let e = read_capped(&fifo, 100).unwrap_err();
        assert!(e.to_string().contains("a FIFO"), "{e}");
        let e = read_capped(Path::new("/dev/zero"), 100).unwrap_err();
        assert!(e.to_string().contains("a device"), "{e}");
        let link = d.path().join("link");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let e = read_capped(&link, 100).unwrap_err();
        assert!(e.to_string().contains("a link"), "{e}");
    }

    #[test]
    fn a_directory_keeps_its_identity_when_renamed_and_a_copy_does_not_carry_it() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a");
        std::fs::create_dir(&a).unwrap();
        let id = dir_identity(&a).unwrap();
        let moved = d.path().join("moved");
        std::fs::rename(&a, &moved).unwrap();
        assert_eq!(dir_identity(&moved).unwrap(), id);
        // A sibling made to look the same, then renamed into the first one's path.
        std::fs::create_dir(&a).unwrap();
        assert_ne!(dir_identity(&a).unwrap(), id);
    }

    #[cfg(unix)]
    #[test]
    fn a_key_file_must_be_private_owned_and_singly_linked() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("key");
        std::fs::write(&p, [0u8; 32]).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        let check = |p: &Path| check_private_file(&open_regular(p).unwrap(), p);
        assert_eq!(check(&p), Ok(()));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = check(&p).unwrap_err();
        assert!(e.contains("mode is 666") && e.contains("chmod 600"), "{e}");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::hard_link(&p, d.path().join("other")).unwrap();
        let e = check(&p).unwrap_err();
        assert!(e.contains("2 hard links"), "{e}");
        std::fs::remove_file(d.path().join("other")).unwrap();
        // Another user's key (only root can make one here).
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::chown(&p, Some(65534), None).unwrap();
            let e = check(&p).unwrap_err();
            assert!(e.contains("belongs to user id 65534"), "{e}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_held_directory_swapped_for_a_link_still_gets_the_files() {
        let d = tempfile::tempdir().unwrap();
        let (state, outside) = (d.path().join("state"), d.path().join("outside"));
        std::fs::create_dir_all(&state).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let held = HeldDir::open(&state).unwrap();
        // Swapped after it was opened: the real directory moves away, a link takes its name.
        let moved = d.path().join("moved");
        std::fs::rename(&state, &moved).unwrap();
        std::os::unix::fs::symlink(&outside, &state).unwrap();
        held.create_new("j.tmp").unwrap();
        held.rename("j.tmp", "j").unwrap();
        assert!(moved.join("j").exists());
        assert!(
            std::fs::read_dir(&outside).unwrap().next().is_none(),
            "nothing outside"
        );
        // And a link at the directory's name is refused when it is opened.
        assert!(HeldDir::open(&state).is_err());
        held.remove("j").unwrap();
        assert!(!moved.join("j").exists());
    }
}
