//! Owner tokens: 128 random bits, fresh for every acquisition, so that only the acquisition
//! that set a lock can renew, hand over or delete it; in front of them, the public part that
//! says who holds it ([`identity`](super::identity)). The bits come from a ChaCha20 generator
//! that each locker keys once from the operating system ([`Secrets`](super::secrets::Secrets)): no
//! system call per acquisition.

use std::fmt;
use std::sync::Arc;

use super::identity::{Identity, Label, LOCKER_ID_LEN, MARK, MAX_LABEL_LEN, SECRET_LEN};

/// The secret that proves ownership of one acquisition, after its public part (see
/// [`identity`](super::identity)): `h1.<locker>.<ms>.<label>.` then 32 random hex digits.
/// Its `Debug` output is redacted, so it cannot leak through logs, traces or error messages.
/// A clone shares the text.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct OwnerToken(Arc<str>);

impl OwnerToken {
    /// A fresh token of the locker `identity` for an acquisition sent now, with its label: the
    /// public part, then 16 bytes of the locker's [`Secrets`](super::secrets::Secrets) as 32 lowercase hex digits.
    pub(crate) fn new(identity: &Identity, label: Option<&Label>) -> Self {
        let locker = identity.id();
        // Written on the stack and copied once into its shared allocation: one allocation
        // per token, on the acquire path.
        let mut buf = [0u8; MAX_TOKEN_LEN];
        let mut len = 0;
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let mut digits = [0u8; 20];
        let mut n = digits.len();
        let mut rest = ms;
        loop {
            n -= 1;
            digits[n] = b'0' + (rest % 10) as u8;
            rest /= 10;
            if rest == 0 {
                break;
            }
        }
        let label = label.map_or("", Label::as_str);
        let locker = &locker.as_bytes()[..locker.len().min(LOCKER_ID_LEN)];
        for part in [
            MARK.as_bytes(),
            locker,
            b".",
            &digits[n..],
            b".",
            label.as_bytes(),
            b".",
        ] {
            buf[len..len + part.len()].copy_from_slice(part);
            len += part.len();
        }
        for b in identity.secrets.next() {
            buf[len] = HEX[(b >> 4) as usize];
            buf[len + 1] = HEX[(b & 0xf) as usize];
            len += 2;
        }
        // Printable ASCII throughout (a checked label, hex digits).
        let text = std::str::from_utf8(&buf[..len]).expect("an owner token is ASCII");
        OwnerToken(Arc::from(text))
    }

    /// A fresh token that says nothing of its holder: the secret alone, as earlier versions
    /// wrote every token (a probe's name, tests).
    pub(crate) fn generate() -> Self {
        let mut token = String::with_capacity(SECRET_LEN);
        push_secret(&mut token);
        OwnerToken(token.into())
    }

    /// The token as it is stored.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }

    /// The random part: its last 32 hex digits.
    pub(crate) fn secret(&self) -> &str {
        &self.0[self.0.len() - SECRET_LEN..]
    }
}

/// The longest owner token: the mark, a locker id, the digits of a `u64`, a label, three dots
/// and the secret.
const MAX_TOKEN_LEN: usize = MARK.len() + LOCKER_ID_LEN + 20 + MAX_LABEL_LEN + 3 + SECRET_LEN;

/// Lowercase hex digits.
const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends 16 bytes from the OS random source as 32 lowercase hex digits.
fn push_secret(out: &mut String) {
    let mut raw = [0u8; 16];
    getrandom::fill(&mut raw).expect("the OS random source failed");
    for b in raw {
        out.push(HEX[(b >> 4) as usize] as char);
        out.push(HEX[(b & 0xf) as usize] as char);
    }
}

/// A random name of 64 bits as 16 hex digits (not a secret: it grants nothing but a place in
/// line, or a probe's name).
pub(crate) fn contender_name() -> String {
    let token = OwnerToken::generate();
    token.secret()[..16].to_owned()
}

/// The name a fair request of the locker `locker` waits under in the store's queue, alone:
/// the locker's id, so that inspection shows who waits, and a random part of its own.
pub(crate) fn request_name(locker: &str) -> String {
    format!("{locker}.{}", contender_name())
}

impl fmt::Debug for OwnerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OwnerToken(<redacted>)")
    }
}

/// A name for a waiter's place in a semaphore's queue: the locker's id (`locker`, 16 hex
/// digits) in its upper 64 bits, so that inspection shows who waits, and 64 random bits.
pub(crate) fn waiter_name(locker: &str) -> u128 {
    let mut raw = [0u8; 8];
    getrandom::fill(&mut raw).expect("the OS random source failed");
    let id = u64::from_str_radix(locker, 16).unwrap_or(0);
    (u128::from(id) << 64) | u128::from(u64::from_le_bytes(raw))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::store::identity::{Label, Stamp};
    use crate::store::secrets::Secrets;

    #[test]
    fn tokens_are_fresh_hex_and_redacted() {
        let a = OwnerToken::generate();
        let b = OwnerToken::generate();
        assert_ne!(a, b);
        assert_eq!(a.as_bytes().len(), 32);
        assert!(a.as_bytes().iter().all(|c| c.is_ascii_hexdigit()));
        let shown = format!("{a:?}");
        assert!(!shown.contains(std::str::from_utf8(a.as_bytes()).unwrap()));
    }

    /// An identity with the locker id `id`.
    fn identity(id: &str) -> Identity {
        let mut me = Identity::new(None);
        me.description.locker = id.to_owned();
        me
    }

    #[test]
    fn secrets_come_from_the_lockers_own_generator() {
        // Two lockers with the same key write the same secrets, in the same order: the bits
        // are the locker's key stream, drawn without asking the operating system each time.
        let (mut a, mut b) = (identity("0123456789abcdef"), identity("0123456789abcdef"));
        a.secrets = Arc::new(Secrets::from_key([7; 32]));
        b.secrets = Arc::new(Secrets::from_key([7; 32]));
        let from_a: Vec<_> = (0..3).map(|_| OwnerToken::new(&a, None)).collect();
        let from_b: Vec<_> = (0..3).map(|_| OwnerToken::new(&b, None)).collect();
        let secrets =
            |ts: &[OwnerToken]| ts.iter().map(|t| t.secret().to_owned()).collect::<Vec<_>>();
        assert_eq!(secrets(&from_a), secrets(&from_b));
        assert_ne!(from_a[0].secret(), from_a[1].secret(), "each draw is fresh");
        // Independently built lockers have keys of their own.
        let (c, d) = (Identity::new(None), Identity::new(None));
        assert_ne!(
            OwnerToken::new(&c, None).secret(),
            OwnerToken::new(&d, None).secret()
        );
        assert_eq!(format!("{:?}", a.secrets), "Secrets(<redacted>)");
    }

    #[test]
    fn stamped_tokens_end_with_their_secret_and_say_who() {
        let me = identity("0123456789abcdef");
        let label = Label::new("req-7f3a").unwrap();
        let before = std::time::SystemTime::now();
        let a = OwnerToken::new(&me, Some(&label));
        let b = OwnerToken::new(&me, Some(&label));
        assert_ne!(a, b, "the secret is fresh");
        assert_eq!(a.secret().len(), 32);
        assert!(a.secret().bytes().all(|c| c.is_ascii_hexdigit()));
        assert!(a.as_bytes().ends_with(a.secret().as_bytes()));
        let stamp = Stamp::of_stored(a.as_bytes()).unwrap();
        let public =
            crate::store::identity::public_part("0123456789abcdef", stamp.since, Some(&label));
        assert!(a.as_bytes().starts_with(public.as_bytes()), "{public}");
        let longest = Label::new(&"x".repeat(crate::store::identity::MAX_LABEL_LEN)).unwrap();
        let long = OwnerToken::new(&me, Some(&longest));
        assert_eq!(
            Stamp::of_stored(long.as_bytes())
                .unwrap()
                .label
                .unwrap()
                .len(),
            64
        );
        assert_eq!(stamp.locker, "0123456789abcdef");
        assert_eq!(stamp.label.as_deref(), Some("req-7f3a"));
        let ms =
            |t: std::time::SystemTime| t.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
        assert!(ms(stamp.since) >= ms(before) && stamp.since <= std::time::SystemTime::now());
        let shown = format!("{a:?}");
        assert!(!shown.contains(a.secret()) && !shown.contains("req-7f3a"));
        // The tags of the sequential engines come from the secret, not the public part.
        assert_ne!(&a.secret()[..16], &b.secret()[..16]);
    }

    #[test]
    fn waiter_names_carry_their_locker() {
        let name = waiter_name("0123456789abcdef");
        assert_eq!(name >> 64, 0x0123_4567_89ab_cdef);
        let place = format!("{name:032x}:2");
        assert_eq!(
            crate::store::identity::locker_of_waiter(&place),
            Some("0123456789abcdef")
        );
        let fair = request_name("0123456789abcdef");
        assert_eq!(
            crate::store::identity::locker_of_waiter(&fair),
            Some("0123456789abcdef")
        );
    }
}
