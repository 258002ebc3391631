//! Short renderings of I/O errors for people.

use std::io;

/// "No such file or directory" rather than "No such file or directory (os error 2)".
pub(crate) fn describe_io_error(error: &io::Error) -> String {
    let text = error.to_string();
    match text.rfind(" (os error ") {
        Some(cut) => text[..cut].to_string(),
        None => text,
    }
}
