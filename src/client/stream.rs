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
