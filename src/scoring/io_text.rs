//! Short renderings of I/O errors for people.

use std::io;

/// "No such file or directory" rather than "No such file or directory (os error 2)".
/// Whether an error says the machine ran out of something (descriptors,
/// processes, memory, disk): the server's problem, never the participant's.
pub fn is_exhaustion(error: &io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOMEM | libc::EAGAIN | libc::ENOSPC)
    )
}

pub(crate) fn describe_io_error(error: &io::Error) -> String {
    let text = error.to_string();
    match text.rfind(" (os error ") {
        Some(cut) => text[..cut].to_string(),
        None => text,
    }
}
