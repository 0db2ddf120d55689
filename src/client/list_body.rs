//! A LIST response body read item by item as it streams in.
//!
//! `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{...},"items":[{...},{...}]}` is
//! scanned once: the bytes of each element of the top-level `items` array are handed on as
//! soon as the element ends (so only one item is in memory at a time, whatever the size of
//! the page), and the bytes of the top-level `metadata` are kept. Each item is then parsed
//! from its bytes by `serde_json::from_slice`, which is several times faster than parsing
//! from a reader, whose every byte goes through an iterator.
//!
//! The scanner follows JSON's structure (strings, escapes, nesting) but does not validate
//! the text: each item and the metadata are validated when they are parsed.

use std::fmt;
use std::io::{self, BufRead};

/// Why a body could not be split.
#[derive(Debug)]
pub enum SplitError {
    /// Reading the body failed (a broken connection).
    Io(io::Error),
    /// The body is not a JSON object with an `items` array, or ends too early.
    Malformed(&'static str),
    /// One item is larger than the limit.
    TooLarge { limit: usize },
    /// The item handler refused an item.
    Item(String),
}

impl fmt::Display for SplitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SplitError::Io(e) => write!(f, "reading the response failed: {e}"),
            SplitError::Malformed(what) => write!(f, "not a list: {what}"),
            SplitError::TooLarge { limit } => {
                write!(f, "an item is larger than {} MiB", limit >> 20)
            }
            SplitError::Item(message) => f.write_str(message),
        }
    }
}

/// Where the scanner is in the top-level object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Top {
    /// Before the opening `{`.
    Start,
    /// After `{` or `,`: a key or `}`.
    Key,
    /// Inside a key's string.
    InKey,
    /// After a key: `:`.
    Colon,
    /// After `:`: the value.
    Value,
    /// Inside a value: `capture` says what happens to its bytes.
    InValue,
    /// Inside the `items` array, between elements.
    Items,
    /// Inside one element of `items`.
    InItem,
    /// After a value: `,` or `}`.
    Next,
    /// After the closing `}`.
    End,
}

/// What a value's bytes are for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Capture {
    Metadata,
    Skip,
}

/// The scanner's state between chunks.
struct Scanner {
    top: Top,
    capture: Capture,
    /// The key being read (top level keys are short; longer ones are cut: they are not
    /// ours anyway).
    key: Vec<u8>,
    /// Nesting inside the current value or item (0: a scalar at its top).
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// A scalar value (number, true, false, null) is being skipped.
    in_scalar: bool,
    item: Vec<u8>,
    metadata: Vec<u8>,
    max_item: usize,
}

/// Splits a LIST body read from `reader`: calls `on_item` with the bytes of each element of
/// `items`, in order, and returns the bytes of the top-level `metadata` (empty when there
/// is none). An item larger than `max_item` bytes is an error.
pub fn split<R: BufRead>(
    mut reader: R,
    max_item: usize,
    on_item: &mut dyn FnMut(&[u8]) -> Result<(), String>,
) -> Result<Vec<u8>, SplitError> {
    let mut scanner = Scanner {
        top: Top::Start,
        capture: Capture::Skip,
        key: Vec::new(),
        depth: 0,
        in_string: false,
        escaped: false,
        in_scalar: false,
        item: Vec::new(),
        metadata: Vec::new(),
        max_item,
    };
    loop {
        let chunk = match reader.fill_buf() {
            Ok(chunk) => chunk,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(SplitError::Io(e)),
        };
        if chunk.is_empty() {
            break;
        }
        let len = chunk.len();
        scanner.scan(chunk, on_item)?;
        reader.consume(len);
    }
    match scanner.top {
        Top::End => Ok(scanner.metadata),
        Top::Start => Err(SplitError::Malformed("the body is empty")),
        _ => Err(SplitError::Malformed("the body ends in the middle")),
    }
}

impl Scanner {
    fn scan(
        &mut self,
        chunk: &[u8],
        on_item: &mut dyn FnMut(&[u8]) -> Result<(), String>,
    ) -> Result<(), SplitError> {
        let mut i = 0;
        while i < chunk.len() {
            match self.top {
                Top::InItem => {
                    let (used, done) = self.skip_value(&chunk[i..]);
                    self.keep_item(&chunk[i..i + used])?;
                    i += used;
                    if done {
                        on_item(&self.item).map_err(SplitError::Item)?;
                        self.item.clear();
                        self.top = Top::Items;
                    }
                    continue;
                }
                Top::InValue => {
                    let (used, done) = self.skip_value(&chunk[i..]);
                    if self.capture == Capture::Metadata {
                        self.metadata.extend_from_slice(&chunk[i..i + used]);
                    }
                    i += used;
                    if done {
                        self.top = Top::Next;
                    }
                    continue;
                }
                _ => {}
            }
            let byte = chunk[i];
            i += 1;
            if byte.is_ascii_whitespace() && self.top != Top::InKey {
                continue;
            }
            self.top = match (self.top, byte) {
                (Top::Start, b'{') => Top::Key,
                (Top::Start, _) => return Err(SplitError::Malformed("it does not start with {")),
                (Top::Key, b'"') => {
                    self.key.clear();
                    Top::InKey
                }
                (Top::Key, b'}') | (Top::Next, b'}') => Top::End,
                (Top::Key, _) => return Err(SplitError::Malformed("expected a key")),
                (Top::InKey, b'"') if !self.escaped => Top::Colon,
                (Top::InKey, _) => {
                    self.escaped = !self.escaped && byte == b'\\';
                    if self.key.len() < 16 {
                        self.key.push(byte);
                    }
                    Top::InKey
                }
                (Top::Colon, b':') => Top::Value,
                (Top::Colon, _) => return Err(SplitError::Malformed("expected :")),
                (Top::Value, b'[') if self.key == b"items" => Top::Items,
                (Top::Value, _) => {
                    self.capture = if self.key == b"metadata" && byte == b'{' {
                        Capture::Metadata
                    } else {
                        Capture::Skip
                    };
                    // Re-scan this byte as the first byte of the value.
                    i -= 1;
                    self.start_value();
                    Top::InValue
                }
                (Top::Items, b']') => Top::Next,
                (Top::Items, b',') => Top::Items,
                (Top::Items, b'{') => {
                    i -= 1;
                    self.start_value();
                    Top::InItem
                }
                (Top::Items, _) => return Err(SplitError::Malformed("an item is not an object")),
                (Top::Next, b',') => Top::Key,
                (Top::Next, _) => return Err(SplitError::Malformed("expected , or }")),
                (Top::End, _) => return Err(SplitError::Malformed("data after the end")),
                (Top::InItem | Top::InValue, _) => unreachable!("handled above"),
            };
        }
        Ok(())
    }

    fn start_value(&mut self) {
        self.depth = 0;
        self.in_string = false;
        self.escaped = false;
        self.in_scalar = false;
    }

    fn keep_item(&mut self, bytes: &[u8]) -> Result<(), SplitError> {
        if self.item.len() + bytes.len() > self.max_item {
            return Err(SplitError::TooLarge {
                limit: self.max_item,
            });
        }
        self.item.extend_from_slice(bytes);
        Ok(())
    }

    /// Scans one value (object, array, string or scalar) as far as `bytes` go: returns how
    /// many bytes belong to it and whether it ended. A scalar ends before the byte that
    /// follows it, which is left for the caller.
    fn skip_value(&mut self, bytes: &[u8]) -> (usize, bool) {
        let mut i = 0;
        while i < bytes.len() {
            let byte = bytes[i];
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if byte == b'\\' {
                    self.escaped = true;
                } else if byte == b'"' {
                    self.in_string = false;
                    if self.depth == 0 {
                        return (i + 1, true);
                    }
                } else {
                    // Jump to the next byte that can end or escape the string.
                    let rest = &bytes[i..];
                    match rest.iter().position(|&b| b == b'"' || b == b'\\') {
                        Some(at) => {
                            i += at;
                            continue;
                        }
                        None => return (bytes.len(), false),
                    }
                }
                i += 1;
                continue;
            }
            if self.in_scalar {
                if matches!(byte, b',' | b'}' | b']') || byte.is_ascii_whitespace() {
                    self.in_scalar = false;
                    return (i, true);
                }
                i += 1;
                continue;
            }
            match byte {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.depth == 0 {
                        return (i + 1, true);
                    }
                }
                _ if self.depth == 0 && !byte.is_ascii_whitespace() => self.in_scalar = true,
                _ => {}
            }
            i += 1;
        }
        (bytes.len(), false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// A reader that hands out `step` bytes at a time, to cut the body everywhere.
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
    }

    impl io::Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.step.min(buf.len()).min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    fn split_all(body: &str, step: usize) -> Result<(Vec<Value>, Value), SplitError> {
        let reader = io::BufReader::with_capacity(
            step.max(1),
            Trickle {
                data: body.as_bytes(),
                step,
            },
        );
        let mut items = Vec::new();
        let metadata = split(reader, 1 << 20, &mut |bytes| {
            items.push(serde_json::from_slice(bytes).map_err(|e| e.to_string())?);
            Ok(())
        })?;
        let metadata = if metadata.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&metadata).unwrap()
        };
        Ok((items, metadata))
    }

    fn tricky_list() -> Value {
        json!({
            "kind": "ConfigMapList",
            "apiVersion": "v1",
            "weird": ["items", {"metadata": {"x": "}]"}}, 12.5e3, true, null, "\\\""],
            "metadata": {"resourceVersion": "18873", "continue": "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ==", "remainingItemCount": 3},
            "items": [
                {"metadata": {"name": "a", "annotations": {"k": "{\"nested\": [1, 2]}"}}, "data": {"x": "quote \" backslash \\ brace } bracket ]"}},
                {"metadata": {"name": "b"}, "data": {"unicode": "\u{e9}\u{1F600} \\u0041"}, "list": [[], {}, [{}]]},
                {}
            ],
            "zlast": 7
        })
    }

    #[test]
    fn every_item_and_the_metadata_come_out_whole_wherever_the_chunks_break() {
        let list = tricky_list();
        for body in [
            list.to_string(),
            serde_json::to_string_pretty(&list).unwrap(),
        ] {
            for step in [1, 2, 3, 7, 64, 4096] {
                let (items, metadata) = split_all(&body, step).unwrap();
                assert_eq!(Value::Array(items), list["items"], "step {step}");
                assert_eq!(metadata, list["metadata"], "step {step}");
            }
        }
    }

    #[test]
    fn an_empty_or_null_items_list_yields_nothing() {
        let (items, metadata) = split_all(
            r#"{"kind":"SecretList","metadata":{"resourceVersion":"5"},"items":[]}"#,
            5,
        )
        .unwrap();
        assert!(items.is_empty());
        assert_eq!(metadata["resourceVersion"], "5");
        let (items, _) = split_all(r#"{"items":null,"metadata":{}}"#, 3).unwrap();
        assert!(items.is_empty());
    }

    #[test]
    fn bodies_that_are_not_lists_are_errors() {
        for (body, why) in [
            ("", "empty"),
            ("[1,2]", "does not start"),
            (r#"{"items":[{"a":1}"#, "middle"),
            (r#"{"items":[1,2]}"#, "not an object"),
            (r#"{"metadata" 1}"#, "expected :"),
            (r#"{"a":1}{"b":2}"#, "after the end"),
        ] {
            let err = split_all(body, 4).unwrap_err();
            assert!(err.to_string().contains(why), "{body}: {err}");
        }
    }

    #[test]
    fn an_item_over_the_limit_is_refused_without_buffering_it_all() {
        let big = format!(r#"{{"items":[{{"data":"{}"}}]}}"#, "x".repeat(10_000));
        let reader = io::BufReader::new(big.as_bytes());
        let err = split(reader, 4096, &mut |_| Ok(())).unwrap_err();
        assert!(matches!(err, SplitError::TooLarge { limit: 4096 }), "{err}");
    }

    #[test]
    fn the_item_handlers_error_stops_the_split() {
        let reader = io::BufReader::new(&br#"{"items":[{},{}]}"#[..]);
        let mut seen = 0;
        let err = split(reader, 1024, &mut |_| {
            seen += 1;
            Err("refused".into())
        })
        .unwrap_err();
        assert_eq!(seen, 1);
        assert_eq!(err.to_string(), "refused");
    }

    #[test]
    fn matches_serde_json_on_generated_lists() {
        // A small deterministic generator of nested JSON values with awkward strings.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        fn value(next: &mut dyn FnMut() -> u64, depth: u32) -> Value {
            let strings = [
                "",
                "\"",
                "\\",
                "}",
                "]",
                "{[",
                "a,b",
                "\u{7f}\u{e9}",
                "\\\"",
            ];
            match next() % if depth > 3 { 4 } else { 6 } {
                0 => Value::Null,
                1 => json!(next() % 1000),
                2 => Value::String(strings[(next() % strings.len() as u64) as usize].into()),
                3 => json!(next() % 2 == 0),
                4 => Value::Array((0..next() % 4).map(|_| value(next, depth + 1)).collect()),
                _ => Value::Object(
                    (0..next() % 4)
                        .map(|k| {
                            (
                                format!("k{k}{}", strings[k as usize % 3]),
                                value(next, depth + 1),
                            )
                        })
                        .collect(),
                ),
            }
        }
        for _ in 0..200 {
            let items: Vec<Value> = (0..next() % 5)
                .map(|_| json!({"metadata": {"name": "x"}, "v": value(&mut next, 0)}))
                .collect();
            let list = json!({"kind": "List", "x": value(&mut next, 0), "metadata": {"resourceVersion": "1"}, "items": items});
            let body = list.to_string();
            let step = 1 + (next() % 13) as usize;
            let (got, metadata) = split_all(&body, step).unwrap();
            assert_eq!(Value::Array(got), list["items"], "{body}");
            assert_eq!(metadata, list["metadata"]);
        }
    }
}
