//! What the config tests share: parsing a command line with a given environment.

use std::collections::HashMap;

use crate::config::{parse, Command, Config, RunConfig};
use crate::error::Error;

pub(crate) fn args(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

pub(crate) fn no_env(_: &str) -> Option<String> {
    None
}

pub(crate) fn parse_with(line: &str, env: &[(&str, &str)]) -> Result<Config, Error> {
    let env: HashMap<String, String> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    parse(&args(line), &|name| env.get(name).cloned())
}

pub(crate) fn run(line: &str, env: &[(&str, &str)]) -> RunConfig {
    match parse_with(line, env) {
        Ok(Config {
            command: Command::Run(run),
            ..
        }) => run,
        other => panic!("{line:?} should be a run config, got {other:?}"),
    }
}

pub(crate) fn error(line: &str, env: &[(&str, &str)]) -> String {
    match parse_with(line, env) {
        Err(Error::Config(msg)) => msg,
        other => panic!("{line:?} should fail with a config error, got {other:?}"),
    }
}
