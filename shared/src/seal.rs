//! AES-256-GCM sealing of secrets at rest: the control plane's stored credentials and the
//! gateway's last-known-good snapshot. A sealed value is `v1.` + base64(nonce ‖ ciphertext),
//! bound to an associated-data label so one row's ciphertext cannot be replayed as another's.

use aes_gcm::aead::{Aead, AeadInPlace, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use rand::RngCore;
use sha2::{Digest, Sha256};

const VERSION: &str = "v1.";
const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("the master key must be 32 bytes, base64-encoded")]
    BadKey,
    #[error("a sealed value is malformed")]
    Malformed,
    #[error("a sealed value does not open with this key (wrong master key, or tampered)")]
    Open,
    #[error("sealing failed")]
    Seal,
}

#[derive(Clone)]
pub struct Cipher {
    aead: Aes256Gcm,
}

impl std::fmt::Debug for Cipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Cipher(..)")
    }
}

impl Cipher {
    pub fn from_key(key: &[u8; 32]) -> Self {
        Self {
            aead: Aes256Gcm::new(key.into()),
        }
    }

    /// A key given as base64 of 32 bytes.
    pub fn from_base64(text: &str) -> Result<Self, SealError> {
        let bytes = B64.decode(text.trim()).map_err(|_| SealError::BadKey)?;
        let key: [u8; 32] = bytes.try_into().map_err(|_| SealError::BadKey)?;
        Ok(Self::from_key(&key))
    }

    /// A key derived from a secret only its holder knows (a deployment token).
    pub fn derived(label: &str, secret: &str) -> Self {
        let mut hasher = Sha256::new();
        hasher.update(label.as_bytes());
        hasher.update([0u8]);
        hasher.update(secret.as_bytes());
        Self::from_key(&hasher.finalize().into())
    }

    /// A fresh random key, base64-encoded.
    pub fn generate_key() -> String {
        let mut key = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut key);
        B64.encode(key)
    }

    pub fn seal(&self, aad: &str, plaintext: &[u8]) -> Result<String, SealError> {
        let mut out = Vec::with_capacity(
            VERSION.len() + (NONCE_LEN + plaintext.len() + TAG_LEN).div_ceil(3) * 4,
        );
        self.seal_into(aad, &mut plaintext.to_vec(), &mut out)
            .map_err(|_| SealError::Seal)?;
        String::from_utf8(out).map_err(|_| SealError::Seal)
    }

    /// Seals `plaintext` in place and writes it to `out` as it is encoded, in
    /// [`Cipher::seal`]'s format: a large value is never copied.
    pub fn seal_into(
        &self,
        aad: &str,
        plaintext: &mut [u8],
        out: &mut impl std::io::Write,
    ) -> std::io::Result<()> {
        use std::io::Write;
        let mut nonce = [0u8; NONCE_LEN];
        rand::rngs::OsRng.fill_bytes(&mut nonce);
        let tag = self
            .aead
            .encrypt_in_place_detached(Nonce::from_slice(&nonce), aad.as_bytes(), plaintext)
            .map_err(|_| std::io::Error::other(SealError::Seal))?;
        out.write_all(VERSION.as_bytes())?;
        let mut encoder = base64::write::EncoderWriter::new(out, &B64);
        encoder.write_all(&nonce)?;
        encoder.write_all(plaintext)?;
        encoder.write_all(&tag)?;
        encoder.finish()?;
        Ok(())
    }

    pub fn open(&self, aad: &str, sealed: &str) -> Result<Vec<u8>, SealError> {
        let body = sealed.strip_prefix(VERSION).ok_or(SealError::Malformed)?;
        let raw = B64.decode(body).map_err(|_| SealError::Malformed)?;
        if raw.len() < NONCE_LEN {
            return Err(SealError::Malformed);
        }
        let (nonce, ct) = raw.split_at(NONCE_LEN);
        self.aead
            .decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: ct,
                    aad: aad.as_bytes(),
                },
            )
            .map_err(|_| SealError::Open)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_sealed_into_a_writer_opens_like_one_sealed_whole() {
        let cipher = Cipher::derived("label", "secret");
        let value = vec![7u8; 100_003];
        let mut out = Vec::new();
        cipher
            .seal_into("aad", &mut value.clone(), &mut out)
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(cipher.open("aad", &text).unwrap(), value);
        assert_eq!(cipher.open("other", &text), Err(SealError::Open));
        let whole = cipher.seal("aad", &value).unwrap();
        assert_eq!(whole.len(), text.len(), "the same format");
    }

    #[test]
    fn round_trips_and_binds_the_label() {
        let c = Cipher::from_base64(&Cipher::generate_key()).unwrap();
        let sealed = c.seal("model:1", b"sk-secret").unwrap();
        assert!(!sealed.contains("sk-secret"));
        assert_eq!(c.open("model:1", &sealed).unwrap(), b"sk-secret");
        assert_eq!(c.open("model:2", &sealed), Err(SealError::Open));
    }

    #[test]
    fn another_key_cannot_open() {
        let a = Cipher::derived("lkg", "token-a");
        let b = Cipher::derived("lkg", "token-b");
        let sealed = a.seal("x", b"data").unwrap();
        assert_eq!(b.open("x", &sealed), Err(SealError::Open));
    }

    #[test]
    fn rejects_short_keys() {
        assert_eq!(
            Cipher::from_base64("c2hvcnQ=").err(),
            Some(SealError::BadKey)
        );
    }
}
