//! Where a session's processes run: PTY shells, exec, freeze/thaw/kill.
