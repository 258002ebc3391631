//! Running an environment's scorer and checking protected files.
