//! The calls this host makes to its own OS, chosen when rocbuild is compiled: links,
//! permission bits, process groups and priorities, file sharing and locks, a full disk.
//! Everything else in the workspace calls these and so compiles the same for every OS.

use std::fs::{File, Metadata, OpenOptions};
use std::io;
use std::path::Path;
use std::process::{Command, ExitStatus};

/// Whether a link made here is an ordinary thing anyone may make (Unix). On Windows making
/// one needs a privilege or developer mode, so what would be a link is copied or written.
pub const LINKS_ARE_ORDINARY: bool = cfg!(unix);

/// Whether a file may be deleted while a handle to it is open (Unix: yes, the name goes at
/// once). On Windows the name stays "delete pending" where deletes are not POSIX-style
/// (before 10 1903, FAT and network drives, Wine), so a lock file is closed first.
pub const DELETE_WHILE_OPEN: bool = cfg!(unix);

/// A symbolic link at `at` to `target` (a directory link when `is_dir`, which only Windows
/// tells apart).
pub fn symlink(target: &Path, at: &Path, is_dir: bool) -> io::Result<()> {
    #[cfg(unix)]
    {
        let _ = is_dir;
        std::os::unix::fs::symlink(target, at)
    }
    #[cfg(windows)]
    {
        if is_dir {
            std::os::windows::fs::symlink_dir(target, at)
        } else {
            std::os::windows::fs::symlink_file(target, at)
        }
    }
    #[cfg(not(any(unix, windows)))]
    {
        let _ = (target, at, is_dir);
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "symbolic links are not supported on this system",
        ))
    }
}

/// `at` becomes what the sibling file `target` is: a link to it where links are ordinary,
/// else a copy of it.
pub fn link_or_copy_sibling(target: &str, at: &Path) -> io::Result<()> {
    if LINKS_ARE_ORDINARY {
        symlink(Path::new(target), at, false)
    } else {
        std::fs::copy(at.with_file_name(target), at).map(|_| ())
    }
}

/// The error a full disk gives (ENOSPC; `StorageFull` elsewhere).
pub fn no_space_error() -> io::Error {
    #[cfg(unix)]
    {
        io::Error::from_raw_os_error(libc::ENOSPC)
    }
    #[cfg(not(unix))]
    {
        io::Error::new(io::ErrorKind::StorageFull, "no space left on device")
    }
}

/// The raw codes of a full disk or a spent quota: ENOSPC and EDQUOT on Unix;
/// ERROR_HANDLE_DISK_FULL, ERROR_DISK_FULL and ERROR_DISK_QUOTA_EXCEEDED on Windows.
#[cfg(unix)]
pub const DISK_FULL_CODES: &[i32] = &[libc::ENOSPC, libc::EDQUOT];
#[cfg(windows)]
pub const DISK_FULL_CODES: &[i32] = &[39, 112, 1295];
#[cfg(not(any(unix, windows)))]
pub const DISK_FULL_CODES: &[i32] = &[];

/// End this process at once, as a real SIGKILL would (no destructors, no flush); abort where
/// there is no SIGKILL (Windows).
pub fn kill_self() -> ! {
    #[cfg(unix)]
    // SAFETY: plain libc calls with no pointers; SIGKILL cannot be caught.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
    // kill() of oneself with SIGKILL does not return; keep the type honest anyway.
    std::process::abort()
}

/// The permission bits of the file at `p` (rwx only); `0o644` where there are none.
pub fn file_mode(p: &Path) -> u32 {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(p).map_or(0o644, |m| m.permissions().mode() & 0o777)
    }
    #[cfg(not(unix))]
    {
        let _ = p;
        0o644
    }
}

/// Set an open file's permission bits (rwx only, never setuid, setgid or sticky) through its
/// handle, so no path and no link is involved. Nothing where there are none.
pub fn set_file_mode(f: &File, mode: u32) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        f.set_permissions(std::fs::Permissions::from_mode(mode & 0o777))
    }
    #[cfg(not(unix))]
    {
        let _ = (f, mode);
        Ok(())
    }
}

/// Set the permission bits of the file at `path` (rwx only). Nothing where there are none.
pub fn set_path_mode(path: &Path, mode: u32) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & 0o777))
    }
    #[cfg(not(unix))]
    {
        let _ = (path, mode);
        Ok(())
    }
}

/// Open `path` with `o` as `0o644` minus the umask, and never writable by others whatever
/// the umask says (a log, a manifest, a journal). Windows: ACLs decide.
pub fn open_private(o: OpenOptions, path: &Path) -> io::Result<File> {
    #[cfg(unix)]
    let o = {
        use std::os::unix::fs::OpenOptionsExt;
        let mut o = o;
        o.mode(0o644);
        o
    };
    let f = o.open(path)?;
    #[cfg(unix)]
    {
        // An umask of 0 must not make it world-writable.
        use std::os::unix::fs::PermissionsExt;
        let mode = f.metadata()?.permissions().mode();
        if mode & 0o022 != 0 {
            f.set_permissions(std::fs::Permissions::from_mode(mode & !0o022))?;
        }
    }
    Ok(f)
}

/// Refuse a directory that another user can write to (or replace before it is made): the
/// directory, when it exists, must be this user's, or root's and writable by root alone;
/// when it does not exist yet, the directory it will be made in must not let others replace
/// it (this user's or root's, and if others can write there, sticky, like `/tmp`). `Err`
/// says what and why. Windows: ACLs decide, and per-user directories are the default.
pub fn check_private_dir(dir: &Path) -> Result<(), String> {
    #[cfg(unix)]
    {
        unix::check_private_dir(dir)
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

/// Is this entry a link: a symlink, or on Windows any reparse point (a junction too)?
pub fn is_link(md: &Metadata) -> bool {
    if md.file_type().is_symlink() {
        return true;
    }
    #[cfg(windows)]
    {
        use std::os::windows::fs::MetadataExt;
        const FILE_ATTRIBUTE_REPARSE_POINT: u32 = 0x400;
        if md.file_attributes() & FILE_ATTRIBUTE_REPARSE_POINT != 0 {
            return true;
        }
    }
    false
}

/// A file's change time (ns) and inode, for telling a replaced file from the same one:
/// Windows has neither, so its creation time and 0.
pub fn change_stamp(md: &Metadata) -> (i128, u64) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        (
            md.ctime() as i128 * 1_000_000_000 + md.ctime_nsec() as i128,
            md.ino(),
        )
    }
    #[cfg(not(unix))]
    {
        let ns = md
            .created()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as i128);
        (ns, 0)
    }
}

/// How a lock file is opened: never through a link (Unix: `O_NOFOLLOW`), and on Windows with
/// read and write sharing but never delete sharing, so that no one (the holder included)
/// deletes it while anyone has it open (see [`DELETE_WHILE_OPEN`]).
pub fn lock_file_options(o: &mut OpenOptions) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.custom_flags(libc::O_NOFOLLOW);
    }
    #[cfg(windows)]
    {
        use std::os::windows::fs::OpenOptionsExt;
        const FILE_SHARE_READ: u32 = 0x1;
        const FILE_SHARE_WRITE: u32 = 0x2;
        o.share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE);
    }
    #[cfg(not(any(unix, windows)))]
    let _ = o;
}

/// Open `p` with `o`, never through a link at `p` itself (Unix: `O_NOFOLLOW`, so no race;
/// elsewhere a link there is refused first).
pub fn open_no_follow(o: OpenOptions, p: &Path) -> io::Result<File> {
    #[cfg(unix)]
    let o = {
        use std::os::unix::fs::OpenOptionsExt;
        let mut o = o;
        o.custom_flags(libc::O_NOFOLLOW);
        o
    };
    #[cfg(not(unix))]
    if std::fs::symlink_metadata(p).is_ok_and(|m| is_link(&m)) {
        return Err(io::Error::other(format!(
            "{} is a link, not a file",
            p.display()
        )));
    }
    o.open(p)
}

/// A file `o` creates is readable and writable by its owner alone (Unix: mode 0600; Windows:
/// a per-user directory's ACLs decide).
pub fn owner_only(o: &mut OpenOptions) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = o;
}

/// The open `file` is still the one at `path` (a releasing holder may have removed it while
/// we waited on the old inode). Windows: opened without delete sharing, it cannot have
/// moved, so it is there when the path is.
pub fn still_the_file_at(file: &File, path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (file.metadata(), std::fs::metadata(path)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = file;
        path.exists()
    }
}

/// Whether another program holds `p` so that it cannot be moved over or deleted: on Windows
/// a DLL that a running process has loaded (its image section denies write and delete, though
/// it can still be renamed), or a file opened without `FILE_SHARE_DELETE`. Asked by opening it
/// for write-data and delete access with every sharing mode, which changes nothing. A
/// read-only file, a link or a directory is not asked about. Unix replaces and unlinks files
/// whatever holds them: never in use there.
pub fn in_use(p: &Path) -> bool {
    #[cfg(windows)]
    {
        windows::in_use(p)
    }
    #[cfg(not(windows))]
    {
        let _ = p;
        false
    }
}

/// The child leads a process group of its own (Unix), so that it and everything it starts
/// can be stopped as one with [`stop_group`]. Nothing where there are no groups.
pub fn own_process_group(cmd: &mut Command) {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    #[cfg(not(unix))]
    let _ = cmd;
}

/// The child runs at a lower CPU priority (nice 10). Nothing where there is no nice.
pub fn lower_priority(cmd: &mut Command) {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: runs in the child between fork and exec; nice(2) is one system call
        // that only lowers the child's own priority (its failure is ignored).
        unsafe {
            cmd.pre_exec(|| {
                libc::nice(10);
                Ok(())
            });
        }
    }
    #[cfg(not(unix))]
    let _ = cmd;
}

/// Ask the process groups led by `pids` to stop (SIGTERM), or make them (`force`: SIGKILL);
/// a group that is gone already is fine. Nothing where there are no groups (Windows).
pub fn signal_groups(pids: &[u32], force: bool) {
    #[cfg(unix)]
    for &pid in pids {
        if let Ok(pid) = i32::try_from(pid) {
            let sig = if force { libc::SIGKILL } else { libc::SIGTERM };
            // SAFETY: kill(2) with a negative pid signals that process group; no pointers.
            unsafe {
                libc::kill(-pid, sig);
            }
        }
    }
    #[cfg(not(unix))]
    let _ = (pids, force);
}

/// Whether no process `pid` runs any more. Unknown, so false, where this cannot be asked
/// (Windows).
pub fn process_gone(pid: u32) -> bool {
    #[cfg(unix)]
    {
        let Ok(pid) = i32::try_from(pid) else {
            return false;
        };
        // SAFETY: kill(2) with signal 0 only checks that the process exists; no pointers.
        let r = unsafe { libc::kill(pid, 0) };
        r != 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
    }
    #[cfg(not(unix))]
    {
        let _ = pid;
        false
    }
}

/// The signal that ended a child, where children end by signals (Unix).
pub fn signal_of(st: &ExitStatus) -> Option<i32> {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        st.signal()
    }
    #[cfg(not(unix))]
    {
        let _ = st;
        None
    }
}

/// Whether this process is a Windows program running under Wine (only Wine's ntdll exports
/// `wine_get_version`). Never true for a program of another OS.
pub fn runs_under_wine() -> bool {
    #[cfg(windows)]
    {
        windows::runs_under_wine()
    }
    #[cfg(not(windows))]
    {
        false
    }
}

#[cfg(unix)]
mod unix {
    use std::os::unix::fs::MetadataExt;
    use std::path::Path;

    pub(super) fn check_private_dir(dir: &Path) -> Result<(), String> {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        let owner_ok = |md: &std::fs::Metadata| md.uid() == me || md.uid() == 0;
        let others_write = |md: &std::fs::Metadata| md.mode() & 0o022 != 0;
        let sticky = |md: &std::fs::Metadata| md.mode() & 0o1000 != 0;
        if let Ok(md) = std::fs::metadata(dir) {
            if md.uid() == me && others_write(&md) {
                return Err(format!(
                    "{} is yours but {} can write to it (mode {:o}): anyone who can could replace the sources rocbuild builds, or its key; run `chmod go-w '{}'`",
                    dir.display(),
                    if md.mode() & 0o002 != 0 { "everyone" } else { "your group" },
                    md.mode() & 0o7777,
                    dir.display()
                ));
            }
            if md.uid() != me && (md.uid() != 0 || others_write(&md)) {
                return Err(format!(
                    "{} belongs to user id {} and {}; rocbuild keeps the sources it builds and the libraries it installs there, so another user could replace them",
                    dir.display(),
                    md.uid(),
                    if others_write(&md) { "others can write to it" } else { "that user can write to it" }
                ));
            }
            return Ok(());
        }
        let mut parent = dir.parent();
        while let Some(p) = parent {
            if let Ok(md) = std::fs::metadata(p) {
                if !owner_ok(&md) || (others_write(&md) && !sticky(&md)) {
                    return Err(format!(
                        "{} would be made in {}, which user id {} owns{}: another user could put their own directory there first",
                        dir.display(),
                        p.display(),
                        md.uid(),
                        if others_write(&md) { " and others can write to without the sticky bit" } else { "" }
                    ));
                }
                return Ok(());
            }
            parent = p.parent();
        }
        Ok(())
    }
}

#[cfg(windows)]
mod windows {
    use std::path::Path;

    pub(super) fn in_use(p: &Path) -> bool {
        use std::os::windows::fs::OpenOptionsExt;
        const DELETE: u32 = 0x0001_0000;
        const FILE_WRITE_DATA: u32 = 0x0002;
        const FILE_SHARE_ALL: u32 = 0x1 | 0x2 | 0x4;
        const ERROR_ACCESS_DENIED: i32 = 5;
        const ERROR_SHARING_VIOLATION: i32 = 32;
        const ERROR_LOCK_VIOLATION: i32 = 33;
        let Ok(md) = std::fs::symlink_metadata(p) else {
            return false;
        };
        if !md.is_file() || md.permissions().readonly() {
            return false;
        }
        match std::fs::OpenOptions::new()
            .access_mode(DELETE | FILE_WRITE_DATA)
            .share_mode(FILE_SHARE_ALL)
            .open(p)
        {
            Ok(_) => false,
            Err(e) => matches!(
                e.raw_os_error(),
                Some(ERROR_ACCESS_DENIED | ERROR_SHARING_VIOLATION | ERROR_LOCK_VIOLATION)
            ),
        }
    }

    pub(super) fn runs_under_wine() -> bool {
        use std::ffi::c_void;
        #[link(name = "kernel32")]
        extern "system" {
            fn GetModuleHandleW(name: *const u16) -> *mut c_void;
            fn GetProcAddress(module: *mut c_void, name: *const u8) -> *mut c_void;
        }
        let ntdll: Vec<u16> = "ntdll.dll\0".encode_utf16().collect();
        // SAFETY: both names are NUL-terminated and outlive the calls; ntdll is always loaded
        // and GetModuleHandleW takes no reference that would need releasing.
        unsafe {
            let module = GetModuleHandleW(ntdll.as_ptr());
            !module.is_null() && !GetProcAddress(module, b"wine_get_version\0".as_ptr()).is_null()
        }
    }
}
