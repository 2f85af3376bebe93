//! Tokens guarding TCP listeners (a program's server, the hub): what makes one acceptable, and
//! comparing one a client presents without telling by the time taken how much of it matched.

use subtle::ConstantTimeEq;

/// The fewest characters a token may have: shorter ones can be guessed.
pub const MIN_TOKEN_LEN: usize = 16;

/// Why a token is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// The token is empty or shorter than [`MIN_TOKEN_LEN`].
    #[error(
        "{what} has {len} characters, fewer than {MIN_TOKEN_LEN}: give a token nobody can guess, such as the output of `openssl rand -hex 16`"
    )]
    TooShort {
        /// Which token (`--token`, `GYR_TOKEN`, ...).
        what: String,
        /// Its length in characters.
        len: usize,
    },
}

/// Checks that `token`, named `what` in the refusal, is long enough to guard a listener.
pub fn check(what: &str, token: &str) -> Result<(), TokenError> {
    let len = token.chars().count();
    if len < MIN_TOKEN_LEN {
        return Err(TokenError::TooShort {
            what: what.to_owned(),
            len,
        });
    }
    Ok(())
}

/// Whether `given` is `expected`, in time that does not depend on where they differ.
pub fn matches(given: &str, expected: &str) -> bool {
    given.as_bytes().ct_eq(expected.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_short_tokens_are_refused() {
        for t in ["", "short", "0123456789abcde"] {
            let e = check("--token", t).unwrap_err().to_string();
            assert!(
                e.contains("--token") && e.contains("openssl rand -hex 16"),
                "{e}"
            );
        }
        check("--token", "0123456789abcdef").unwrap();
    }

    #[test]
    fn only_the_same_token_matches() {
        assert!(matches("0123456789abcdef", "0123456789abcdef"));
        assert!(!matches("0123456789abcdeF", "0123456789abcdef"));
        assert!(!matches("0123456789abcdef0", "0123456789abcdef"));
        assert!(!matches("", "0123456789abcdef"));
    }
}
