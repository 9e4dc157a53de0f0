//! Subscription signing secrets at rest: sealed with AES-256-GCM under a key
//! from the configuration, or generated once and kept in the data directory.
//! Each sealed value is bound to its row (the subscription id is the
//! associated data), so a sealed secret copied into another row does not open.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use sha2::{Digest, Sha256};

use crate::ids::random_bytes;

/// The name of the generated key's file in the data directory.
pub const KEY_FILE: &str = "herald.key";
/// Marks a sealed value and its format.
pub const SEALED_PREFIX: &str = "sealed:v1:";
const NONCE_BYTES: usize = 12;

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("secret_key: {0}")]
    Invalid(String),
    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },
}

/// 32 random bytes; never logged or shown.
pub struct SecretKey([u8; 32]);

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretKey(…)")
    }
}

impl SecretKey {
    pub fn from_base64(text: &str) -> Result<SecretKey, String> {
        let bytes = STANDARD
            .decode(text.trim())
            .or_else(|_| URL_SAFE_NO_PAD.decode(text.trim()))
            .map_err(|_| "must be base64 (e.g. the output of `openssl rand -base64 32`)".to_string())?;
        let key: [u8; 32] = bytes.try_into().map_err(|_| "must decode to exactly 32 bytes".to_string())?;
        Ok(SecretKey(key))
    }

    pub fn generate() -> SecretKey {
        SecretKey(random_bytes::<32>())
    }

    fn to_base64(&self) -> String {
        STANDARD.encode(self.0)
    }

    /// The configured key; else the one in `key_dir`, created on first start.
    /// Without a directory (an in-memory database) the key lives as long as the process.
    pub fn resolve(configured: Option<&str>, key_dir: Option<&Path>) -> Result<SecretKey, KeyError> {
        if let Some(text) = configured {
            return SecretKey::from_base64(text).map_err(KeyError::Invalid);
        }
        match key_dir {
            Some(dir) => load_or_create(&dir.join(KEY_FILE)),
            None => Ok(SecretKey::generate()),
        }
    }
}

/// Reads the key file, or creates it (mode 0600) without ever replacing one that another process
/// created at the same moment: the new key is written aside, then linked into place.
fn load_or_create(path: &Path) -> Result<SecretKey, KeyError> {
    let file_error = |message: String| KeyError::File { path: path.to_path_buf(), message };
    match fs::read_to_string(path) {
        Ok(text) => return SecretKey::from_base64(&text).map_err(file_error),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(file_error(format!("cannot read the secret key: {e}"))),
    }
    let key = SecretKey::generate();
    let aside = path.with_extension(format!("key.{}.tmp", URL_SAFE_NO_PAD.encode(random_bytes::<6>())));
    write_private(&aside, &key.to_base64()).map_err(|e| file_error(format!("cannot write the secret key: {e}")))?;
    let linked = fs::hard_link(&aside, path);
    let _ = fs::remove_file(&aside);
    match linked {
        Ok(()) => {
            tracing::warn!(
                path = %path.display(),
                "generated the key that seals subscription secrets; back it up with the database, which is unreadable without it"
            );
            Ok(key)
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            let text = fs::read_to_string(path).map_err(|e| file_error(format!("cannot read the secret key: {e}")))?;
            SecretKey::from_base64(&text).map_err(file_error)
        }
        Err(e) => Err(file_error(format!("cannot create the secret key: {e}"))),
    }
}

fn write_private(path: &Path, text: &str) -> io::Result<()> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(text.as_bytes())?;
    file.write_all(b"\n")?;
    file.sync_all()
}

#[derive(Debug, thiserror::Error)]
#[error("a sealed secret did not open: wrong key, damaged value, or copied from another row")]
pub struct Unsealable;

/// Seals and opens secrets under one key.
pub struct Sealer {
    cipher: Aes256Gcm,
    fingerprint: String,
}

impl Sealer {
    pub fn new(key: &SecretKey) -> Sealer {
        let digest = Sha256::new_with_prefix(b"herald secret key fingerprint v1").chain_update(key.0).finalize();
        Sealer {
            cipher: Aes256Gcm::new_from_slice(&key.0).expect("a 32-byte key"),
            fingerprint: URL_SAFE_NO_PAD.encode(&digest[..16]),
        }
    }

    /// Names the key without revealing it; stored in the database to refuse a wrong key at start.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    pub fn is_sealed(value: &str) -> bool {
        value.starts_with(SEALED_PREFIX)
    }

    pub fn seal(&self, plaintext: &str, row_id: &str) -> String {
        let nonce = random_bytes::<NONCE_BYTES>();
        let sealed = self
            .cipher
            .encrypt(Nonce::from_slice(&nonce), Payload { msg: plaintext.as_bytes(), aad: row_id.as_bytes() })
            .expect("AES-GCM encrypts any message this size");
        let mut bytes = nonce.to_vec();
        bytes.extend_from_slice(&sealed);
        format!("{SEALED_PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes))
    }

    pub fn open(&self, sealed: &str, row_id: &str) -> Result<String, Unsealable> {
        let encoded = sealed.strip_prefix(SEALED_PREFIX).ok_or(Unsealable)?;
        let bytes = URL_SAFE_NO_PAD.decode(encoded).map_err(|_| Unsealable)?;
        if bytes.len() < NONCE_BYTES {
            return Err(Unsealable);
        }
        let (nonce, body) = bytes.split_at(NONCE_BYTES);
        let plain = self
            .cipher
            .decrypt(Nonce::from_slice(nonce), Payload { msg: body, aad: row_id.as_bytes() })
            .map_err(|_| Unsealable)?;
        String::from_utf8(plain).map_err(|_| Unsealable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sealer() -> Sealer {
        Sealer::new(&SecretKey::generate())
    }

    #[test]
    fn sealed_secrets_open_only_with_their_key_and_row() {
        let s = sealer();
        let sealed = s.seal("whsec_abc", "sub_1");
        assert!(Sealer::is_sealed(&sealed) && !sealed.contains("whsec_abc"));
        assert_eq!(s.open(&sealed, "sub_1").unwrap(), "whsec_abc");
        assert!(s.open(&sealed, "sub_2").is_err(), "bound to its row");
        assert!(sealer().open(&sealed, "sub_1").is_err(), "another key cannot open it");
        assert_ne!(sealed, s.seal("whsec_abc", "sub_1"), "a fresh nonce every time");
        let mut damaged = sealed.clone();
        damaged.pop();
        assert!(s.open(&damaged, "sub_1").is_err());
        assert!(s.open("whsec_abc", "sub_1").is_err(), "plaintext is not a sealed value");
    }

    #[test]
    fn keys_parse_from_base64_of_32_bytes_only() {
        assert!(SecretKey::from_base64(&STANDARD.encode([7u8; 32])).is_ok());
        assert!(SecretKey::from_base64(&URL_SAFE_NO_PAD.encode([7u8; 32])).is_ok());
        assert!(SecretKey::from_base64(&STANDARD.encode([7u8; 16])).unwrap_err().contains("32 bytes"));
        assert!(SecretKey::from_base64("not base64!").unwrap_err().contains("base64"));
        let a = Sealer::new(&SecretKey::from_base64(&STANDARD.encode([7u8; 32])).unwrap());
        let b = Sealer::new(&SecretKey::from_base64(&STANDARD.encode([7u8; 32])).unwrap());
        assert_eq!(a.fingerprint(), b.fingerprint());
        assert_ne!(a.fingerprint(), sealer().fingerprint());
    }

    #[test]
    fn the_generated_key_is_kept_private_and_reused() {
        let dir = std::env::temp_dir().join(format!("herald-key-{}", URL_SAFE_NO_PAD.encode(random_bytes::<6>())));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join(KEY_FILE);
        let first = load_or_create(&path).unwrap();
        let again = load_or_create(&path).unwrap();
        assert_eq!(first.0, again.0);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        }
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1, "no temporary file is left behind");
        fs::remove_dir_all(&dir).unwrap();
    }
}
