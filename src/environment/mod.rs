//! Environment definitions: manifest, validation, hardware checks, normalization.
