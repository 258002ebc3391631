//! Identifiers: short session ids a person can type, and secrets.

use rand::Rng;

/// Lowercase letters and digits without the easily confused ones (0/o, 1/l/i).
const ID_ALPHABET: &[u8] = b"abcdefghjkmnpqrstuvwxyz23456789";

/// A short session id such as `k7mq2x`.
pub fn new_session_id() -> String {
    let mut rng = rand::rng();
    (0..6)
        .map(|_| ID_ALPHABET[rng.random_range(0..ID_ALPHABET.len())] as char)
        .collect()
}

/// A random 128-bit secret as hex (participant tokens, sandbox markers).
pub fn new_secret() -> String {
    let bytes: [u8; 16] = rand::rng().random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `s` looks like a session id (used to reject path tricks early).
pub fn is_valid_session_id(s: &str) -> bool {
    !s.is_empty() && s.len() <= 32 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_short_and_typeable() {
        for _ in 0..100 {
            let id = new_session_id();
            assert_eq!(id.len(), 6);
            assert!(id.bytes().all(|b| ID_ALPHABET.contains(&b)));
            assert!(is_valid_session_id(&id));
        }
        assert!(!is_valid_session_id("../etc"));
        assert!(!is_valid_session_id(""));
    }

    #[test]
    fn secrets_differ() {
        let a = new_secret();
        assert_eq!(a.len(), 32);
        assert_ne!(a, new_secret());
    }
}
