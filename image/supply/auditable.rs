//! The dependency list inside the binary, as `cargo auditable` embeds it: the crates as
//! JSON (its format 1: name, version, source, kind, dependency indices, root),
//! zlib-compressed, in a `.dep-v0` ELF section that scanners (Trivy, Grype, Syft,
//! `rust-audit-info`) read from a binary or a running container. The section comes from
//! a small relocatable object that `build.rs` hands the linker.

use super::deps::{Graph, Source};
use super::json::Json;

/// The ELF section `cargo auditable` and its readers use.
pub const SECTION: &str = ".dep-v0";

/// The JSON `cargo auditable` would embed for `graph`: every crate of the graph in its
/// order, `kind: build` for a crate that is not linked (a proc-macro and what only it
/// uses), `root: true` for the package built.
pub fn dep_v0_json(graph: &Graph) -> String {
    let packages = graph
        .crates
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let source = match c.source {
                Source::CratesIo => "crates.io",
                Source::Registry(_) => "registry",
                Source::Git(_) => "git",
                Source::Path => "local",
            };
            let mut fields = vec![
                ("name", Json::str(&c.name)),
                ("version", Json::str(&c.version)),
                ("source", Json::str(source)),
            ];
            if !c.linked {
                fields.push(("kind", Json::str("build")));
            }
            if !c.dependencies.is_empty() {
                let deps = c.dependencies.iter().map(|&d| Json::Num(d as u64));
                fields.push(("dependencies", Json::Arr(deps.collect())));
            }
            if i == graph.root {
                fields.push(("root", Json::Bool(true)));
            }
            Json::obj(fields)
        })
        .collect();
    Json::obj([("packages", Json::Arr(packages)), ("format", Json::Num(1))]).compact()
}

/// `data` as a zlib stream (RFC 1950) holding one deflate block with the fixed Huffman
/// codes (RFC 1951 §3.2.6) and greedy LZ77 matches: what any zlib reader inflates, in
/// 130 lines instead of a dependency. wavelet's list shrinks to about a quarter (4,533 to
/// 1,175 bytes).
pub fn zlib(data: &[u8]) -> Vec<u8> {
    let mut bits = Bits::default();
    bits.push(1, 1); // BFINAL
    bits.push(1, 2); // BTYPE 01: fixed Huffman codes
    const WINDOW: usize = 32 * 1024;
    const MAX_MATCH: usize = 258;
    let mut last_at: std::collections::HashMap<[u8; 3], Vec<usize>> = Default::default();
    let mut i = 0;
    while i < data.len() {
        let mut best = (0, 0); // (length, distance)
        if i + 3 <= data.len() {
            let key = [data[i], data[i + 1], data[i + 2]];
            if let Some(starts) = last_at.get(&key) {
                for &start in starts.iter().rev().take(64) {
                    if i - start > WINDOW {
                        break;
                    }
                    let limit = MAX_MATCH.min(data.len() - i);
                    let length = (0..limit)
                        .take_while(|&k| data[start + k] == data[i + k])
                        .count();
                    if length > best.0 {
                        best = (length, i - start);
                    }
                }
            }
        }
        let step = if best.0 >= 3 {
            bits.length(best.0);
            bits.distance(best.1);
            best.0
        } else {
            bits.literal(data[i] as u16);
            1
        };
        for at in i..i + step {
            if at + 3 <= data.len() {
                let key = [data[at], data[at + 1], data[at + 2]];
                last_at.entry(key).or_default().push(at);
            }
        }
        i += step;
    }
    bits.literal(256); // end of block
    let mut out = vec![0x78, 0x9c]; // deflate, 32 KiB window; (0x789c % 31 == 0)
    out.extend(bits.finish());
    out.extend(adler32(data).to_be_bytes());
    out
}

/// Bits in deflate's order: values least significant bit first, Huffman codes most
/// significant bit first.
#[derive(Default)]
struct Bits {
    bytes: Vec<u8>,
    used: u32, // bits used in the last byte
}

const LENGTH_BASE: [u16; 29] = [
    3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131,
    163, 195, 227, 258,
];
const LENGTH_EXTRA: [u32; 29] = [
    0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
];
const DISTANCE_BASE: [u16; 30] = [
    1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537,
    2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577,
];
const DISTANCE_EXTRA: [u32; 30] = [
    0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13,
    13,
];

impl Bits {
    /// The `count` low bits of `value`, least significant first.
    fn push(&mut self, value: u32, count: u32) {
        for k in 0..count {
            if self.used == 0 {
                self.bytes.push(0);
            }
            let bit = ((value >> k) & 1) as u8;
            *self.bytes.last_mut().unwrap() |= bit << self.used;
            self.used = (self.used + 1) % 8;
        }
    }

    /// A Huffman code of `count` bits, most significant first.
    fn code(&mut self, code: u32, count: u32) {
        let reversed = (0..count).fold(0, |r, k| (r << 1) | ((code >> k) & 1));
        self.push(reversed, count);
    }

    /// A literal/length symbol (0..=285) in the fixed code.
    fn literal(&mut self, symbol: u16) {
        let s = symbol as u32;
        match symbol {
            0..=143 => self.code(0x30 + s, 8),
            144..=255 => self.code(0x190 + s - 144, 9),
            256..=279 => self.code(s - 256, 7),
            _ => self.code(0xc0 + s - 280, 8),
        }
    }

    fn length(&mut self, length: usize) {
        let i = LENGTH_BASE
            .iter()
            .rposition(|&b| b as usize <= length)
            .unwrap();
        self.literal(257 + i as u16);
        self.push((length - LENGTH_BASE[i] as usize) as u32, LENGTH_EXTRA[i]);
    }

    fn distance(&mut self, distance: usize) {
        let i = DISTANCE_BASE
            .iter()
            .rposition(|&b| b as usize <= distance)
            .unwrap();
        self.code(i as u32, 5);
        self.push(
            (distance - DISTANCE_BASE[i] as usize) as u32,
            DISTANCE_EXTRA[i],
        );
    }

    fn finish(self) -> Vec<u8> {
        self.bytes
    }
}

fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for &byte in data {
        a = (a + byte as u32) % 65521;
        b = (b + a) % 65521;
    }
    (b << 16) | a
}

/// The ELF machine number of a Rust `target_arch`, for the architectures wavelet ships.
pub fn elf_machine(arch: &str) -> Option<u16> {
    match arch {
        "x86_64" => Some(62),   // EM_X86_64
        "aarch64" => Some(183), // EM_AARCH64
        _ => None,
    }
}

/// The global symbol that marks the section, which `build.rs` asks the linker to keep
/// (`-u`): `--gc-sections` drops a section nothing refers to. Not cargo auditable's own
/// name, so a `cargo auditable build` of wavelet links rather than failing on a duplicate.
pub const SYMBOL: &str = "WAVELET_DEP_V0";

/// A little-endian ELF64 relocatable object for `machine` with one section `name`
/// holding `contents` and the global `symbol` at its start. The section is not
/// allocated (no address, not loaded; the linker copies it to the binary as it does
/// `.comment`, and `--strip-all` keeps it). An empty `.note.GNU-stack` says the object
/// needs no executable stack.
pub fn elf_object(machine: u16, name: &str, symbol: &str, contents: &[u8]) -> Vec<u8> {
    const SHT_PROGBITS: u32 = 1;
    const SHT_SYMTAB: u32 = 2;
    const SHT_STRTAB: u32 = 3;
    const STB_GLOBAL_STT_OBJECT: u8 = 0x11;
    fn strings(list: &[&str]) -> (Vec<u8>, Vec<u32>) {
        let mut table = vec![0u8];
        let mut at = Vec::new();
        for s in list {
            at.push(table.len() as u32);
            table.extend(s.as_bytes());
            table.push(0);
        }
        (table, at)
    }
    let (section_names, name_at) =
        strings(&[name, ".note.GNU-stack", ".symtab", ".strtab", ".shstrtab"]);
    let (symbol_names, symbol_at) = strings(&[symbol]);
    let mut symbols = vec![0u8; 24]; // entry 0: the null symbol
    symbols.extend(symbol_at[0].to_le_bytes());
    symbols.push(STB_GLOBAL_STT_OBJECT);
    symbols.push(0); // default visibility
    symbols.extend(1u16.to_le_bytes()); // in section 1
    symbols.extend(0u64.to_le_bytes()); // at its start
    symbols.extend((contents.len() as u64).to_le_bytes());

    // The layout: header, contents, symbols (8-aligned), their names, section names,
    // section headers (8-aligned).
    let contents_at = 64u64;
    let symbols_at = (contents_at + contents.len() as u64).next_multiple_of(8);
    let symbol_names_at = symbols_at + symbols.len() as u64;
    let section_names_at = symbol_names_at + symbol_names.len() as u64;
    let headers_at = (section_names_at + section_names.len() as u64).next_multiple_of(8);
    let sections = 6u16;

    let mut out = Vec::new();
    out.extend(b"\x7fELF");
    out.extend([2, 1, 1, 0]); // 64-bit, little-endian, ELF version 1, System V ABI
    out.extend([0; 8]);
    out.extend(1u16.to_le_bytes()); // ET_REL
    out.extend(machine.to_le_bytes());
    out.extend(1u32.to_le_bytes()); // EV_CURRENT
    out.extend(0u64.to_le_bytes()); // entry
    out.extend(0u64.to_le_bytes()); // program headers: none
    out.extend(headers_at.to_le_bytes());
    out.extend(0u32.to_le_bytes()); // flags
    out.extend(64u16.to_le_bytes()); // ELF header size
    out.extend(0u16.to_le_bytes()); // program header entry size
    out.extend(0u16.to_le_bytes()); // program headers
    out.extend(64u16.to_le_bytes()); // section header entry size
    out.extend(sections.to_le_bytes());
    out.extend((sections - 1).to_le_bytes()); // the section names are the last section
    out.extend(contents);
    out.resize(symbols_at as usize, 0);
    out.extend(&symbols);
    out.extend(&symbol_names);
    out.extend(&section_names);
    out.resize(headers_at as usize, 0);

    // name, type, offset, size, link, info, alignment, entry size; flags and address 0.
    let mut header = |fields: (u32, u32, u64, u64, u32, u32, u64, u64)| {
        let (name, kind, offset, size, link, info, align, entry) = fields;
        out.extend(name.to_le_bytes());
        out.extend(kind.to_le_bytes());
        out.extend(0u64.to_le_bytes()); // flags: not allocated, not writable
        out.extend(0u64.to_le_bytes()); // address
        out.extend(offset.to_le_bytes());
        out.extend(size.to_le_bytes());
        out.extend(link.to_le_bytes());
        out.extend(info.to_le_bytes());
        out.extend(align.to_le_bytes());
        out.extend(entry.to_le_bytes());
    };
    header((0, 0, 0, 0, 0, 0, 0, 0));
    let size = contents.len() as u64;
    header((name_at[0], SHT_PROGBITS, contents_at, size, 0, 0, 1, 0));
    header((name_at[1], SHT_PROGBITS, symbols_at, 0, 0, 0, 1, 0));
    let size = symbols.len() as u64;
    // .symtab: names in section 4; its first global symbol is entry 1.
    header((name_at[2], SHT_SYMTAB, symbols_at, size, 4, 1, 8, 24));
    let size = symbol_names.len() as u64;
    header((name_at[3], SHT_STRTAB, symbol_names_at, size, 0, 0, 1, 0));
    let size = section_names.len() as u64;
    header((name_at[4], SHT_STRTAB, section_names_at, size, 0, 0, 1, 0));
    out
}

#[cfg(test)]
mod tests {
    use super::super::deps::{graph, parse_lock};
    use super::*;

    /// A reader of what [`zlib`] writes (fixed-code blocks), to check the round trip
    /// here; `tests/supply.rs` inflates the real section with pigz, another zlib.
    fn inflate_fixed(stream: &[u8]) -> Vec<u8> {
        assert_eq!(&stream[..2], [0x78, 0x9c]);
        let body = &stream[2..stream.len() - 4];
        let mut at = 0usize; // bit position
        let bit = |at: &mut usize| {
            let b = (body[*at / 8] >> (*at % 8)) & 1;
            *at += 1;
            b as u32
        };
        let bits = |at: &mut usize, n: u32| (0..n).fold(0, |v, k| v | (bit(at) << k));
        assert_eq!(bits(&mut at, 3), 0b011, "one final fixed-code block");
        let code = |at: &mut usize, n: u32| (0..n).fold(0, |v, _| (v << 1) | bit(at));
        let mut out: Vec<u8> = Vec::new();
        loop {
            let mut c = code(&mut at, 7);
            let symbol = if c <= 0x17 {
                256 + c
            } else {
                c = (c << 1) | code(&mut at, 1);
                if (0x30..=0xbf).contains(&c) {
                    c - 0x30
                } else if (0xc0..=0xc7).contains(&c) {
                    280 + c - 0xc0
                } else {
                    c = (c << 1) | code(&mut at, 1);
                    144 + c - 0x190
                }
            };
            match symbol {
                0..=255 => out.push(symbol as u8),
                256 => break,
                _ => {
                    let i = (symbol - 257) as usize;
                    let length = LENGTH_BASE[i] as usize + bits(&mut at, LENGTH_EXTRA[i]) as usize;
                    let d = code(&mut at, 5) as usize;
                    let distance =
                        DISTANCE_BASE[d] as usize + bits(&mut at, DISTANCE_EXTRA[d]) as usize;
                    for _ in 0..length {
                        out.push(out[out.len() - distance]);
                    }
                }
            }
        }
        let check = u32::from_be_bytes(stream[stream.len() - 4..].try_into().unwrap());
        assert_eq!(check, adler32(&out));
        out
    }

    #[test]
    fn adler32_of_wikipedia_is_the_known_value() {
        assert_eq!(adler32(b"Wikipedia"), 0x11e6_0398);
    }

    #[test]
    fn zlib_round_trips_and_shrinks_repetitive_text() {
        let json = r#"{"name":"serde","version":"1.0.0","source":"crates.io"},"#.repeat(60);
        for data in [
            &b""[..],
            b"a",
            b"abcabcabcabcabcabc",
            &[0xff, 0x90, 0x00, 0x8f, 0xfe],
            json.as_bytes(),
            &(0..=255u8).cycle().take(70_000).collect::<Vec<_>>(),
        ] {
            assert_eq!(inflate_fixed(&zlib(data)), data);
        }
        assert!(zlib(json.as_bytes()).len() < json.len() / 3);
    }

    #[test]
    fn the_dep_v0_json_has_cargo_auditables_shape() {
        let lock = parse_lock(
            "[[package]]\nname = \"app\"\nversion = \"0.1.0\"\n\n[[package]]\nname = \"derive\"\nversion = \"1.0.0\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\n\n[[package]]\nname = \"lib\"\nversion = \"2.0.0\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\n",
        );
        let graph = graph(
            "0|MIT|app v0.1.0 (/app)\n1|MIT|derive v1.0.0 (proc-macro)\n1|MIT|lib v2.0.0\n",
            &lock,
        )
        .unwrap();
        assert_eq!(
            dep_v0_json(&graph),
            r#"{"packages":[{"name":"app","version":"0.1.0","source":"local","dependencies":[1,2],"root":true},{"name":"derive","version":"1.0.0","source":"crates.io","kind":"build"},{"name":"lib","version":"2.0.0","source":"crates.io"}],"format":1}"#
        );
    }

    #[test]
    fn the_object_is_an_elf_relocatable_with_the_section_its_symbol_and_a_stack_note() {
        let object = elf_object(183, SECTION, SYMBOL, b"payload");
        assert_eq!(&object[..4], b"\x7fELF");
        assert_eq!(u16::from_le_bytes([object[16], object[17]]), 1, "ET_REL");
        assert_eq!(u16::from_le_bytes([object[18], object[19]]), 183);
        let headers_at = u64::from_le_bytes(object[40..48].try_into().unwrap()) as usize;
        let section = |i: usize| &object[headers_at + 64 * i..headers_at + 64 * (i + 1)];
        let field = |s: &[u8], at: usize| u64::from_le_bytes(s[at..at + 8].try_into().unwrap());
        let names = section(5);
        let names = &object[field(names, 24) as usize..][..field(names, 32) as usize];
        let name_of = |s: &[u8]| {
            let at = u32::from_le_bytes(s[..4].try_into().unwrap()) as usize;
            let end = names[at..].iter().position(|&b| b == 0).unwrap();
            String::from_utf8(names[at..at + end].to_vec()).unwrap()
        };
        assert_eq!(name_of(section(1)), ".dep-v0");
        assert_eq!(field(section(1), 8), 0, "not allocated");
        let at = field(section(1), 24) as usize;
        assert_eq!(&object[at..at + field(section(1), 32) as usize], b"payload");
        assert_eq!(name_of(section(2)), ".note.GNU-stack");
        assert_eq!(
            field(section(2), 8),
            0,
            "no SHF_EXECINSTR: the stack stays non-executable"
        );
        assert_eq!(name_of(section(3)), ".symtab");
        let symbols = &object[field(section(3), 24) as usize..][..48];
        let symbol = &symbols[24..];
        let strtab = section(4);
        let strtab = &object[field(strtab, 24) as usize..][..field(strtab, 32) as usize];
        let at = u32::from_le_bytes(symbol[..4].try_into().unwrap()) as usize;
        assert_eq!(&strtab[at..at + SYMBOL.len() + 1], b"WAVELET_DEP_V0\0");
        assert_eq!(symbol[4], 0x11, "a global object");
        assert_eq!(u16::from_le_bytes([symbol[6], symbol[7]]), 1, "in .dep-v0");
        assert_eq!(elf_machine("x86_64"), Some(62));
        assert_eq!(elf_machine("riscv64"), None);
    }
}
