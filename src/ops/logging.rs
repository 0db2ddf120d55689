//! Log output: `env_logger` filtered by `RUST_LOG` (else `--log-level`, else `info`), as text or as one JSON
//! object a line. Decision lines start with the object they concern
//! (`deployment default/web: rolled: ...`); in JSON that object is its own field, so log
//! pipelines can filter on it.

use std::io::Write;

use crate::config::LogFormat;

/// Installs the logger; call once. `level` (`--log-level`) applies unless `RUST_LOG` is set.
pub fn init(format: LogFormat, level: Option<&str>) {
    let mut builder = env_logger::Builder::from_env(
        env_logger::Env::default().default_filter_or(level.unwrap_or("info")),
    );
    if let LogFormat::Json = format {
        builder.format(|out, record| {
            let text = record.args().to_string();
            let (object, msg) = split_object(&text);
            let mut line = serde_json::json!({
                "ts": out.timestamp_millis().to_string(),
                "level": record.level().as_str(),
                "target": record.target(),
                "msg": msg,
            });
            if let Some(object) = object {
                line["object"] = object.into();
            }
            writeln!(out, "{line}")
        });
    }
    let logger = builder.build();
    let max = logger.filter();
    if log::set_boxed_logger(Box::new(NoWireDumps(logger))).is_ok() {
        log::set_max_level(max);
    }
}

/// Drops the trace records of the HTTP and TLS libraries: at trace level `ureq_proto`
/// dumps every request's bytes, the `Authorization: Bearer` header included, and a
/// token must never reach a log, whatever `RUST_LOG` says.
struct NoWireDumps(env_logger::Logger);

impl NoWireDumps {
    fn allowed(metadata: &log::Metadata) -> bool {
        metadata.level() < log::Level::Trace
            || !["ureq", "rustls"]
                .iter()
                .any(|lib| metadata.target().starts_with(lib))
    }
}

impl log::Log for NoWireDumps {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        Self::allowed(metadata) && self.0.enabled(metadata)
    }

    fn log(&self, record: &log::Record) {
        if Self::allowed(record.metadata()) {
            self.0.log(record);
        }
    }

    fn flush(&self) {
        self.0.flush();
    }
}

/// Splits `"<kind> <namespace>/<name>: <message>"` into the object and the message; other
/// lines have no object.
pub fn split_object(line: &str) -> (Option<&str>, &str) {
    let Some((head, rest)) = line.split_once(": ") else {
        return (None, line);
    };
    let names_an_object = head.split_once(' ').is_some_and(|(kind, path)| {
        !kind.is_empty()
            && kind.bytes().all(|b| b.is_ascii_lowercase())
            && path
                .split_once('/')
                .is_some_and(|(ns, name)| !ns.is_empty() && !name.is_empty() && !path.contains(' '))
    });
    if names_an_object {
        (Some(head), rest)
    } else {
        (None, line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decision_lines_name_their_object_apart() {
        assert_eq!(
            split_object("deployment default/web: rolled: configmap default/app changed"),
            (
                Some("deployment default/web"),
                "rolled: configmap default/app changed"
            )
        );
        assert_eq!(
            split_object("secret shop/creds: cannot read its data, retrying in 1s: 403"),
            (
                Some("secret shop/creds"),
                "cannot read its data, retrying in 1s: 403"
            )
        );
    }

    #[test]
    fn other_lines_have_no_object() {
        for line in [
            "initial sync complete in 1s: 3 ConfigMaps/Secrets, 1 opted-in workloads",
            "wavelet 0.1.0 starting against http://127.0.0.1:8001",
            "configmaps in all namespaces: list failed, relisting: 503",
            "stopping: finishing in-flight work",
        ] {
            assert_eq!(split_object(line), (None, line));
        }
    }
}
