//! gyr's own messages on the program's standard error.
//!
//! Each is written whole with one `write`, so that the messages of many processes sharing a
//! standard error (the ranks of an MPI job, merged by `mpirun`) do not interleave mid-line;
//! and a message that cannot be written is dropped. `eprintln!` panics then (a full disk, the
//! usual case on a long run whose logs and trace share a file system), and a panic on a
//! monitor thread would stop the recording along with the message.

use std::io::Write;

/// Writes `args` and a newline to standard error in one piece, ignoring failure.
#[doc(hidden)]
pub fn diag(args: std::fmt::Arguments<'_>) {
    let mut line = std::fmt::format(args);
    line.push('\n');
    let _ = std::io::stderr().write_all(line.as_bytes());
}

/// `eprintln!` for code that runs inside a monitored program: see [`diag`](crate::__private::diag).
#[doc(hidden)]
#[macro_export]
macro_rules! diag {
    ($($arg:tt)*) => {
        $crate::__private::diag(::std::format_args!($($arg)*))
    };
}
