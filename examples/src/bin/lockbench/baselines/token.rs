//! Owner tokens for the baselines, made as users make them: 16 random bytes from the OS, in
//! hex.

pub(crate) fn token() -> String {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).expect("random");
    b.iter().map(|x| format!("{x:02x}")).collect()
}
