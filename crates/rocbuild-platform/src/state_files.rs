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
/// time (where the file system keeps one); Windows its volume serial number, file index and
/// creation time. A rename keeps all of them; a copy (`cp -r`, a restored backup, a sibling
/// venv renamed into this path) gets new ones.
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

    #[test]
    fn a_regular_file_is_read_up_to_its_cap_and_no_further() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, b"0123456789").unwrap();
        assert_eq!(read_capped(&p, 10).unwrap(), b"0123456789");
        let e = read_capped(&p, 9).unwrap_err();
        assert!(e.to_string().contains("10 bytes"), "{e}");
        let e = read_capped(d.path(), 9).unwrap_err();
        assert!(e.to_string().contains("a directory"), "{e}");
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
    }
}
