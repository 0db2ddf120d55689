//! Watch streams: one JSON event per `\n`-terminated line, bounded in size and time.

use super::*;

/// The body of a watch: one JSON event per `\n`-terminated line.
pub struct WatchStream {
    reader: Box<dyn Read + Send>,
    buf: Vec<u8>,
    /// Start of the unconsumed bytes in `buf`.
    start: usize,
    /// `buf[start..scanned]` is known to hold no `\n`.
    scanned: usize,
    eof: bool,
    pub(super) max_line: usize,
    /// The watched path (no query), for messages.
    what: String,
}

impl WatchStream {
    pub(super) fn new(reader: Box<dyn Read + Send>, path_and_query: &str) -> WatchStream {
        WatchStream {
            reader,
            buf: Vec::new(),
            start: 0,
            scanned: 0,
            eof: false,
            max_line: MAX_WATCH_LINE,
            what: format!(
                "watch {}",
                path_and_query.split('?').next().unwrap_or(path_and_query)
            ),
        }
    }

    /// The next newline-terminated line, without the `\n`; `Ok(None)` at a clean end of the
    /// stream. Lines are split on `\n` only, never on chunk or read boundaries; blank lines
    /// are skipped. A broken connection, or a stream that ends in the middle of a line, is
    /// [`Error::Transport`]; a line longer than [`MAX_WATCH_LINE`] (8 MiB) is
    /// [`Error::Decode`].
    pub fn next_line(&mut self) -> Result<Option<Vec<u8>>, Error> {
        loop {
            if let Some(offset) = self.buf[self.scanned..].iter().position(|&b| b == b'\n') {
                let end = self.scanned + offset;
                let line = &self.buf[self.start..end];
                let blank = line.iter().all(|b| b.is_ascii_whitespace());
                let line = if blank { None } else { Some(line.to_vec()) };
                self.start = end + 1;
                self.scanned = self.start;
                if let Some(line) = line {
                    return Ok(Some(line));
                }
                continue;
            }
            self.scanned = self.buf.len();
            let pending = self.buf.len() - self.start;
            if self.eof {
                let partial = self.buf[self.start..]
                    .iter()
                    .any(|b| !b.is_ascii_whitespace());
                self.buf.clear();
                self.start = 0;
                self.scanned = 0;
                if partial {
                    return Err(Error::Transport(format!(
                        "{}: the stream ended in the middle of an event ({pending} bytes without a newline)",
                        self.what
                    )));
                }
                return Ok(None);
            }
            if pending > self.max_line {
                return Err(Error::Decode(format!(
                    "{}: an event is longer than {} MiB; giving up on this stream",
                    self.what,
                    self.max_line >> 20
                )));
            }
            self.fill()?;
        }
    }

    /// Reads more bytes, first dropping the consumed ones (and excess capacity after a huge event).
    pub(super) fn fill(&mut self) -> Result<(), Error> {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.scanned -= self.start;
            self.start = 0;
        }
        // After a large event, give its memory back instead of keeping it for the life of
        // the watch.
        if self.buf.capacity() > (256 << 10) && self.buf.len() < WATCH_READ {
            self.buf.shrink_to(2 * WATCH_READ);
        }
        let old_len = self.buf.len();
        // ureq buffers 16 KiB of the connection: reading more at once gains nothing, and
        // every open watch keeps this buffer.
        self.buf.resize(old_len + WATCH_READ, 0);
        let result = loop {
            match self.reader.read(&mut self.buf[old_len..]) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other,
            }
        };
        match result {
            Ok(n) => {
                self.buf.truncate(old_len + n);
                if n == 0 {
                    self.eof = true;
                }
                Ok(())
            }
            Err(e) => {
                self.buf.truncate(old_len);
                Err(Error::Transport(format!(
                    "{}: connection broken: {e}",
                    self.what
                )))
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A reader that hands out its bytes in pieces of the given sizes (cycling), then `end`.
    struct Pieces {
        data: Vec<u8>,
        pos: usize,
        sizes: Vec<usize>,
        turn: usize,
        broken_at_end: bool,
    }

    impl Read for Pieces {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.pos == self.data.len() {
                if self.broken_at_end {
                    return Err(io::Error::new(
                        io::ErrorKind::ConnectionReset,
                        "connection reset by peer",
                    ));
                }
                return Ok(0);
            }
            let size = self.sizes[self.turn % self.sizes.len()]
                .min(buf.len())
                .min(self.data.len() - self.pos);
            self.turn += 1;
            buf[..size].copy_from_slice(&self.data[self.pos..self.pos + size]);
            self.pos += size;
            Ok(size)
        }
    }

    fn stream(data: &[u8], sizes: &[usize], broken_at_end: bool) -> WatchStream {
        let reader = Pieces {
            data: data.to_vec(),
            pos: 0,
            sizes: sizes.to_vec(),
            turn: 0,
            broken_at_end,
        };
        WatchStream::new(Box::new(reader), "/api/v1/configmaps?watch=true")
    }

    pub(in crate::client) fn all_lines(stream: &mut WatchStream) -> Result<Vec<String>, Error> {
        let mut lines = Vec::new();
        while let Some(line) = stream.next_line()? {
            lines.push(String::from_utf8(line).expect("utf-8"));
        }
        Ok(lines)
    }

    #[test]
    fn watch_lines_are_split_on_newlines_never_on_read_boundaries() {
        let events = [
            r#"{"type":"ADDED","object":{"kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"1"}}}"#,
            r#"{"type":"MODIFIED","object":{"kind":"ConfigMap","metadata":{"name":"b","resourceVersion":"2"}}}"#,
            r#"{"type":"BOOKMARK","object":{"kind":"ConfigMap","metadata":{"resourceVersion":"3"}}}"#,
        ];
        let body = format!("{}\n\n{}\n{}\n", events[0], events[1], events[2]);
        for sizes in [
            vec![1],
            vec![2],
            vec![3, 7],
            vec![5, 1, 64],
            vec![97],
            vec![1 << 20],
        ] {
            let lines =
                all_lines(&mut stream(body.as_bytes(), &sizes, false)).expect("clean stream");
            assert_eq!(lines, events, "read sizes {sizes:?}");
        }
    }

    #[test]
    fn a_clean_end_of_the_stream_is_none_and_stays_none() {
        let mut s = stream(b"{\"type\":\"ADDED\"}\n  \n", &[4], false);
        assert_eq!(
            s.next_line().expect("line"),
            Some(b"{\"type\":\"ADDED\"}".to_vec())
        );
        assert_eq!(s.next_line().expect("end"), None);
        assert_eq!(s.next_line().expect("still the end"), None);
        assert_eq!(
            stream(b"", &[1], false).next_line().expect("empty stream"),
            None
        );
    }

    #[test]
    fn a_stream_that_ends_in_the_middle_of_a_line_is_a_transport_error() {
        let mut s = stream(b"{\"type\":\"ADDED\"}\n{\"type\":\"MODI", &[3], false);
        assert!(s.next_line().expect("first line").is_some());
        match s.next_line() {
            Err(Error::Transport(message)) => {
                assert!(message.contains("middle of an event"), "{message}")
            }
            other => panic!("expected a transport error, got {other:?}"),
        }
    }

    #[test]
    fn a_broken_connection_is_a_transport_error() {
        let mut s = stream(b"{\"type\":\"ADDED\"}\n{\"ty", &[100], true);
        assert!(s.next_line().expect("first line").is_some());
        match s.next_line() {
            Err(Error::Transport(message)) => {
                assert!(message.contains("connection broken"), "{message}")
            }
            other => panic!("expected a transport error, got {other:?}"),
        }
    }

    #[test]
    fn a_10_mib_watch_line_is_refused_by_the_default_limit() {
        let mut line = vec![b'x'; 10 << 20];
        line.push(b'\n');
        let mut s = stream(&line, &[64 << 10], false);
        match s.next_line() {
            Err(Error::Decode(message)) => assert!(message.contains("longer than 8 MiB")),
            other => panic!(
                "expected a decode error, got {:?}",
                other.map(|l| l.map(|l| l.len()))
            ),
        }
    }

    #[test]
    fn a_line_longer_than_the_limit_is_an_error() {
        let mut s = stream(&vec![b'x'; 300_000], &[70_000], false);
        s.max_line = 100_000;
        assert!(matches!(s.next_line(), Err(Error::Decode(_))));
    }
}
