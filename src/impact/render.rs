//! An [`Impact`] as people and programs read it: a table for the terminal, JSON, and
//! Markdown fit for a pull-request comment. Pure: the report holds key names and
//! workload names, never a value.

use crate::impact::plan::{Change, DeleteMode, Impact, ObjectImpact, When};

/// `-o`.
pub use crate::config::ImpactOutput as Output;

/// The whole output, ending in a newline; `notes` are what could not be read.
pub fn render(impact: &Impact, notes: &[String], output: Output) -> String {
    match output {
        Output::Table => table(impact, notes),
        Output::Json => json(impact, notes),
        Output::Markdown => markdown(impact, notes),
    }
}

fn change_text(object: &ObjectImpact) -> String {
    let list = |v: &[String]| v.join(", ");
    match object.change {
        Change::New => format!("new object (keys {})", list(&object.keys_added)),
        Change::Unchanged => "unchanged".into(),
        Change::MetadataOnly => "metadata only".into(),
        Change::Data => {
            let mut parts = Vec::new();
            if !object.keys_changed.is_empty() {
                parts.push(format!("changed {}", list(&object.keys_changed)));
            }
            if !object.keys_added.is_empty() {
                parts.push(format!("added {}", list(&object.keys_added)));
            }
            if !object.keys_removed.is_empty() {
                parts.push(format!("removed {}", list(&object.keys_removed)));
            }
            format!("keys {}", parts.join("; "))
        }
    }
}

fn when_text(when: &When) -> String {
    match when {
        When::Now => "now".into(),
        When::Window { opens_at, .. } => format!("at {opens_at} (window)"),
        When::Paused { .. } => "paused".into(),
        When::AfterWave { wave, .. } => format!("wave {wave}, after wave {}", wave - 1),
        When::Held { .. } => "held (fan-out)".into(),
    }
}

fn delete_mode_text(d: &DeleteMode) -> String {
    let head = format!("delete mode ({}, {})", d.selector, d.strategy);
    match (&d.problem, &d.pods) {
        (Some(problem), _) => format!("{head}: replaces no Pod: {problem}"),
        (None, None) => {
            format!("{head}: replaces the Pods matching the selector (Pods not known offline)")
        }
        (None, Some(pods)) if pods.is_empty() => format!("{head}: no Pod matches now"),
        (None, Some(pods)) => format!(
            "{head}: replaces {} Pod(s): {}",
            pods.len(),
            pods.join(", ")
        ),
    }
}

fn summary(impact: &Impact) -> String {
    match impact.rolls() {
        0 => "rolls nothing".into(),
        1 => "1 workload rolls".into(),
        n => format!("{n} workloads roll"),
    }
}

fn table(impact: &Impact, notes: &[String]) -> String {
    let mut out = String::new();
    for object in &impact.objects {
        out.push_str(&format!("{}: {}", object.object, change_text(object)));
        if object.rolls.is_empty() {
            out.push_str(": rolls nothing");
        }
        out.push('\n');
        for a in &object.rolls {
            out.push_str(&format!("  ROLLS    {:<40} {}\n", a.workload, a.why));
        }
        for a in &object.rolls_not {
            out.push_str(&format!("  NO ROLL  {:<40} {}\n", a.workload, a.why));
        }
        if !object.rolls.is_empty() {
            out.push_str(&format!("  fan-out: {}\n", object.fan_out));
        }
        for (i, wave) in object.waves.iter().enumerate() {
            out.push_str(&format!("    wave {}: {}\n", i + 1, wave.join(", ")));
        }
        if let Some(d) = &object.delete_mode {
            out.push_str(&format!("  {}\n", delete_mode_text(d)));
        }
    }
    if !impact.workloads.is_empty() {
        out.push_str(&format!("\n{:<40} {:<34} WHY\n", "WORKLOAD", "WHEN"));
        for w in &impact.workloads {
            out.push_str(&format!(
                "{:<40} {:<34} {}\n",
                w.workload,
                when_text(&w.when),
                w.why
            ));
        }
    }
    for note in notes {
        out.push_str(&format!("note: {note}\n"));
    }
    out.push_str(&format!("\n{}\n", summary(impact)));
    out
}

fn json(impact: &Impact, notes: &[String]) -> String {
    let value = serde_json::json!({
        "rolls": impact.rolls(),
        "objects": impact.objects,
        "workloads": impact.workloads,
        "notes": notes,
    });
    let mut text = serde_json::to_string_pretty(&value).expect("the report serializes");
    text.push('\n');
    text
}

/// A cell: `|` escaped, one line.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

fn markdown(impact: &Impact, notes: &[String]) -> String {
    let mut out = format!("### wavelet impact: {}\n\n", summary(impact));
    out.push_str("| Object | Change | Rolls | Fan-out |\n|---|---|---|---|\n");
    for o in &impact.objects {
        let fan_out = if o.waves.is_empty() {
            o.fan_out.clone()
        } else {
            o.waves
                .iter()
                .enumerate()
                .map(|(i, w)| format!("wave {}: {}", i + 1, w.join(", ")))
                .collect::<Vec<_>>()
                .join("<br>")
        };
        out.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            cell(&o.object),
            cell(&change_text(o)),
            o.rolls.len(),
            cell(&fan_out)
        ));
    }
    if !impact.workloads.is_empty() {
        out.push_str("\n| Workload | When | Why |\n|---|---|---|\n");
        for w in &impact.workloads {
            out.push_str(&format!(
                "| `{}` | {} | {} |\n",
                cell(&w.workload),
                cell(&when_text(&w.when)),
                cell(&w.why)
            ));
        }
    }
    let quiet: Vec<String> = impact
        .objects
        .iter()
        .flat_map(|o| {
            o.rolls_not.iter().map(move |a| {
                format!(
                    "| `{}` | `{}` | {} |",
                    cell(&a.workload),
                    cell(&o.object),
                    cell(&a.why)
                )
            })
        })
        .collect();
    if !quiet.is_empty() {
        out.push_str(
            "\n<details><summary>Workloads that use a changed object and do not roll</summary>\n\n",
        );
        out.push_str("| Workload | Object | Why not |\n|---|---|---|\n");
        for line in quiet {
            out.push_str(&line);
            out.push('\n');
        }
        out.push_str("\n</details>\n");
    }
    let deletes: Vec<String> = impact
        .objects
        .iter()
        .filter_map(|o| {
            Some(format!(
                "- `{}`: {}",
                cell(&o.object),
                cell(&delete_mode_text(o.delete_mode.as_ref()?))
            ))
        })
        .collect();
    if !deletes.is_empty() {
        out.push('\n');
        for line in deletes {
            out.push_str(&line);
            out.push('\n');
        }
    }
    for note in notes {
        out.push_str(&format!("\n> note: {}\n", cell(note)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::impact::plan::{Affected, WorkloadImpact};

    fn impact() -> Impact {
        Impact {
            objects: vec![ObjectImpact {
                object: "configmap team/a".into(),
                change: Change::Data,
                keys_added: vec![],
                keys_removed: vec![],
                keys_changed: vec!["y".into()],
                rolls: vec![Affected {
                    workload: "deployment team/web".into(),
                    why: "uses every key; changed: y".into(),
                }],
                rolls_not: vec![Affected {
                    workload: "deployment team/only-x".into(),
                    why: "uses only key x, unchanged".into(),
                }],
                waves: vec![],
                fan_out: "at once: one workload rolls".into(),
                delete_mode: None,
            }],
            workloads: vec![WorkloadImpact {
                workload: "deployment team/web".into(),
                waves: vec![],
                when: When::Window {
                    opens_at: "2026-01-10T01:00:00Z".into(),
                    windows: "Sat 01:00-02:00 | x".into(),
                },
                why: "outside its window a|b".into(),
            }],
        }
    }

    #[test]
    fn the_table_lists_what_rolls_and_what_does_not() {
        let text = render(&impact(), &[], Output::Table);
        assert!(
            text.starts_with("configmap team/a: keys changed y\n  ROLLS    deployment team/web"),
            "{text}"
        );
        assert!(text.contains(
            "NO ROLL  deployment team/only-x                   uses only key x, unchanged"
        ));
        assert!(text.contains("at 2026-01-10T01:00:00Z (window)"));
        assert!(text.ends_with("\n1 workload rolls\n"));
    }

    #[test]
    fn markdown_cells_escape_pipes_and_json_counts_the_rolls() {
        let text = render(&impact(), &["a note".into()], Output::Markdown);
        assert!(text.starts_with("### wavelet impact: 1 workload rolls\n"));
        assert!(text.contains("| `deployment team/web` | at 2026-01-10T01:00:00Z (window) | outside its window a\\|b |"), "{text}");
        let json: serde_json::Value =
            serde_json::from_str(&render(&impact(), &[], Output::Json)).unwrap();
        assert_eq!(json["rolls"], 1);
        assert_eq!(json["workloads"][0]["when"]["at"], "window");
        assert_eq!(
            json["objects"][0]["rolls_not"][0]["workload"],
            "deployment team/only-x"
        );
    }
}
