//! Bearer tokens: none, static, a file re-read as it rotates (service-account tokens), or an
//! exec credential plugin's; invalidated after a 401.

use super::*;

/// Where the bearer token comes from.
pub(super) enum TokenSource {
    None,
    Static(String),
    /// Re-read by path when older than [`TOKEN_MAX_AGE`] and after a 401 (bound service
    /// account tokens rotate; the kubelet swaps a symlink, so the path is opened every time).
    File {
        path: PathBuf,
        /// What the file is ("service account token"), and what the user should check when it
        /// cannot be read; both go into the error message.
        what: &'static str,
        hint: String,
        cached: Mutex<CachedToken>,
    },
    /// An exec credential plugin's token, run again at expiry and after a 401.
    Exec(Arc<exec::ExecPlugin>),
}

/// The last token read from a file; `read_at: None` means "re-read before the next use".
pub(super) struct CachedToken {
    token: String,
    read_at: Option<Instant>,
}

impl TokenSource {
    /// Reads the file once now, so a missing token is an error at start.
    pub(super) fn file(
        path: PathBuf,
        what: &'static str,
        hint: String,
    ) -> Result<TokenSource, Error> {
        let token = read_token_file(&path, what, &hint)?;
        let cached = Mutex::new(CachedToken {
            token,
            read_at: Some(Instant::now()),
        });
        Ok(TokenSource::File {
            path,
            what,
            hint,
            cached,
        })
    }

    /// A 401 may be cured by a new credential: a token file rotates, a plugin runs again.
    pub(super) fn is_refreshable(&self) -> bool {
        matches!(self, TokenSource::File { .. } | TokenSource::Exec(_))
    }

    /// The token to send at `now`, re-reading the file when the cached copy is stale. When the
    /// file cannot be read any more, the last token is used (and a warning logged), as client-go does.
    pub(super) fn bearer(&self, now: Instant) -> Result<Option<String>, Error> {
        match self {
            TokenSource::None => Ok(None),
            TokenSource::Static(token) => Ok(Some(token.clone())),
            TokenSource::Exec(plugin) => Ok(plugin.credential(std::time::SystemTime::now())?.token),
            TokenSource::File {
                path,
                what,
                hint,
                cached,
            } => {
                let mut cached = lock(cached);
                let fresh = cached
                    .read_at
                    .is_some_and(|at| now.saturating_duration_since(at) < TOKEN_MAX_AGE);
                if !fresh {
                    match read_token_file(path, what, hint) {
                        Ok(token) => cached.token = token,
                        Err(error) => log::warn!("{error}; using the token read before"),
                    }
                    cached.read_at = Some(now);
                }
                Ok(Some(cached.token.clone()))
            }
        }
    }

    /// Marks the cached token stale so the next request re-reads the file or runs the
    /// plugin again (after a 401).
    pub(super) fn invalidate(&self) {
        match self {
            TokenSource::File { cached, .. } => lock(cached).read_at = None,
            TokenSource::Exec(plugin) => plugin.invalidate(),
            TokenSource::None | TokenSource::Static(_) => {}
        }
    }
}

pub(super) fn read_token_file(path: &Path, what: &str, hint: &str) -> Result<String, Error> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Error::Config(format!(
            "cannot read {what} {}: {e} ({hint})",
            path.display()
        ))
    })?;
    let token = text.trim();
    check_token(token)
        .map_err(|why| Error::Config(format!("{what} {} {why} ({hint})", path.display())))?;
    Ok(token.to_string())
}

/// A bearer token must be non-empty visible ASCII to go into a header.
pub(super) fn check_token(token: &str) -> Result<(), &'static str> {
    if token.is_empty() {
        return Err("is empty");
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("contains characters that cannot be sent in an HTTP header");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::test_support::*;

    use crate::testing::TempDir;

    #[test]
    fn a_token_file_is_re_read_after_a_minute_and_after_a_401() {
        let dir = TempDir::new("client");
        let path = dir.write("token", "first\n");
        let source = TokenSource::file(path.clone(), "token file", "hint".into()).expect("token");
        let t0 = Instant::now();
        assert_eq!(source.bearer(t0).expect("token").as_deref(), Some("first"));
        std::fs::write(&path, "second").expect("rotate");
        assert_eq!(
            source
                .bearer(t0 + Duration::from_secs(30))
                .expect("token")
                .as_deref(),
            Some("first")
        );
        assert_eq!(
            source
                .bearer(t0 + Duration::from_secs(61))
                .expect("token")
                .as_deref(),
            Some("second")
        );
        std::fs::write(&path, "third").expect("rotate");
        source.invalidate();
        assert_eq!(
            source
                .bearer(t0 + Duration::from_secs(62))
                .expect("token")
                .as_deref(),
            Some("third")
        );
    }

    #[test]
    fn an_unreadable_token_file_keeps_the_last_token() {
        let dir = TempDir::new("client");
        let path = dir.write("token", "kept");
        let source = TokenSource::file(path.clone(), "token file", "hint".into()).expect("token");
        std::fs::remove_file(&path).expect("remove");
        source.invalidate();
        assert_eq!(
            source.bearer(Instant::now()).expect("token").as_deref(),
            Some("kept")
        );
    }

    #[test]
    fn a_missing_token_file_names_the_file_and_the_flags_that_help() {
        let dir = TempDir::new("client");
        dir.write("ca.crt", CA_CRT);
        let m = config_message(Client::in_cluster_from(&dir.0, "10.96.0.1", "443", false));
        assert!(
            m.contains(&dir.0.join("token").display().to_string()),
            "{m}"
        );
        assert!(
            m.contains("automountServiceAccountToken")
                && m.contains("--server")
                && m.contains("--kubeconfig"),
            "{m}"
        );
        dir.write("token", "  \n");
        assert!(
            config_message(Client::in_cluster_from(&dir.0, "10.96.0.1", "443", false))
                .contains("is empty")
        );
    }
}
