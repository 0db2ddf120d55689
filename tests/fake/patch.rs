//! The three PATCH formats: RFC 7386 merge patch, Kubernetes strategic merge patch (maps
//! merge, `null` deletes, named lists merge by their merge key, other lists replace) and
//! RFC 6902 JSON patch.

use serde_json::{Map, Value};

/// RFC 7386: objects merge recursively, `null` deletes, everything else replaces.
pub fn merge_patch(target: &Value, patch: &Value) -> Value {
    let Value::Object(patch_map) = patch else {
        return patch.clone();
    };
    let mut out = match target {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    for (key, value) in patch_map {
        if value.is_null() {
            out.remove(key);
        } else {
            let merged = merge_patch(out.get(key).unwrap_or(&Value::Null), value);
            out.insert(key.clone(), merged);
        }
    }
    Value::Object(out)
}

/// The merge key of the lists the fake merges by key (`patchMergeKey` in the Go types);
/// every other list is replaced.
fn merge_key(field: &str) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "resourceClaims" => "name",
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "ports" => "containerPort",
        "conditions" => "type",
        "hostAliases" => "ip",
        "topologySpreadConstraints" => "topologyKey",
        _ => return None,
    })
}

/// Strategic merge patch. Errors are the message for a 400/422.
pub fn strategic_merge_patch(target: &Value, patch: &Value) -> Result<Value, String> {
    let Value::Object(patch_map) = patch else {
        return Err("strategic merge patch body must be a JSON object".into());
    };
    let mut out = match target {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    if let Some(directive) = patch_map.get("$patch") {
        match directive.as_str() {
            Some("replace") => {
                let mut replaced = patch_map.clone();
                replaced.remove("$patch");
                return Ok(Value::Object(replaced));
            }
            Some("delete") => return Ok(Value::Object(Map::new())),
            _ => return Err(format!("Unknown patch type: {directive}")),
        }
    }
    for (key, value) in patch_map {
        if key.starts_with("$setElementOrder/") {
            continue; // ordering hints do not change content
        }
        if key.starts_with('$') {
            return Err(format!(
                "the fake does not implement the strategic merge patch directive {key}"
            ));
        }
        match value {
            Value::Null => {
                out.remove(key);
            }
            Value::Object(_) => {
                let merged = strategic_merge_patch(out.get(key).unwrap_or(&Value::Null), value)?;
                out.insert(key.clone(), merged);
            }
            Value::Array(items) => {
                let merged = match (merge_key(key), out.get(key)) {
                    (Some(merge_key), Some(Value::Array(existing))) => {
                        merge_list(existing, items, merge_key)?
                    }
                    _ => Value::Array(
                        items
                            .iter()
                            .filter(|i| i.get("$patch").is_none())
                            .cloned()
                            .collect(),
                    ),
                };
                out.insert(key.clone(), merged);
            }
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    Ok(Value::Object(out))
}

fn merge_list(existing: &[Value], patch: &[Value], merge_key: &str) -> Result<Value, String> {
    let mut out: Vec<Value> = existing.to_vec();
    for item in patch {
        let Some(key_value) = item.get(merge_key) else {
            return Err(format!(
                "map: {item} does not contain declared merge key: {merge_key}"
            ));
        };
        let position = out.iter().position(|e| e.get(merge_key) == Some(key_value));
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (position, delete) {
            (Some(i), true) => {
                out.remove(i);
            }
            (None, true) => {}
            (Some(i), false) => out[i] = strategic_merge_patch(&out[i], item)?,
            (None, false) => out.push(strategic_merge_patch(&Value::Null, item)?),
        }
    }
    Ok(Value::Array(out))
}

/// RFC 6902. Errors mean "the patch could not be applied" (the server's generic 422).
pub fn json_patch(target: &Value, ops: &[Value]) -> Result<Value, String> {
    let mut doc = target.clone();
    for op in ops {
        let name = op["op"].as_str().ok_or("missing op")?;
        let path = op["path"].as_str().ok_or("missing path")?;
        match name {
            "add" => add(&mut doc, path, value_of(op)?)?,
            "remove" => {
                remove(&mut doc, path)?;
            }
            "replace" => {
                remove(&mut doc, path)?;
                add(&mut doc, path, value_of(op)?)?;
            }
            "test" => {
                let actual = doc
                    .pointer(&pointer(path)?)
                    .ok_or("test: path does not exist")?;
                if actual != &value_of(op)? {
                    return Err(format!("testing value {path} failed"));
                }
            }
            "copy" | "move" => {
                let from = op["from"].as_str().ok_or("missing from")?;
                let value = doc
                    .pointer(&pointer(from)?)
                    .cloned()
                    .ok_or("from path does not exist")?;
                if name == "move" {
                    remove(&mut doc, from)?;
                }
                add(&mut doc, path, value)?;
            }
            other => return Err(format!("unexpected operation {other}")),
        }
    }
    Ok(doc)
}

fn value_of(op: &Value) -> Result<Value, String> {
    op.get("value")
        .cloned()
        .ok_or_else(|| "missing value".to_string())
}

/// Validates a JSON pointer and returns it in the form `Value::pointer` takes.
fn pointer(path: &str) -> Result<String, String> {
    if !path.is_empty() && !path.starts_with('/') {
        return Err(format!("invalid path {path}"));
    }
    Ok(path.to_string())
}

fn split(path: &str) -> Result<(String, String), String> {
    let path = pointer(path)?;
    let idx = path.rfind('/').ok_or("cannot change the document root")?;
    let last = path[idx + 1..].replace("~1", "/").replace("~0", "~");
    Ok((path[..idx].to_string(), last))
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), String> {
    if path.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (parent, last) = split(path)?;
    match doc.pointer_mut(&parent) {
        Some(Value::Object(map)) => {
            map.insert(last, value);
            Ok(())
        }
        Some(Value::Array(items)) => {
            let index = if last == "-" {
                items.len()
            } else {
                last.parse().map_err(|_| "bad array index")?
            };
            if index > items.len() {
                return Err("array index out of bounds".into());
            }
            items.insert(index, value);
            Ok(())
        }
        _ => Err(format!(
            "add operation does not apply: doc is missing path: \"{path}\""
        )),
    }
}

fn remove(doc: &mut Value, path: &str) -> Result<Value, String> {
    let (parent, last) = split(path)?;
    match doc.pointer_mut(&parent) {
        Some(Value::Object(map)) => map
            .remove(&last)
            .ok_or_else(|| format!("missing path {path}")),
        Some(Value::Array(items)) => {
            let index: usize = last.parse().map_err(|_| "bad array index")?;
            if index >= items.len() {
                return Err("array index out of bounds".into());
            }
            Ok(items.remove(index))
        }
        _ => Err(format!(
            "remove operation does not apply: doc is missing path: \"{path}\""
        )),
    }
}

/// Go's `encoding/json` text for the common ways a body fails to parse (wire 051).
pub fn go_json_error(body: &str) -> String {
    let err = match serde_json::from_str::<Value>(body) {
        Ok(_) => return String::new(),
        Err(e) => e,
    };
    let offending = body
        .lines()
        .nth(err.line().saturating_sub(1))
        .and_then(|line| line.chars().nth(err.column().saturating_sub(1)))
        .map(|c| c.to_string())
        .unwrap_or_default();
    let text = err.to_string();
    if err.is_eof() {
        "unexpected end of JSON input".into()
    } else if text.starts_with("key must be a string") {
        format!("invalid character '{offending}' looking for beginning of object key string")
    } else if text.starts_with("expected value") || text.starts_with("expected ident") {
        format!("invalid character '{offending}' looking for beginning of value")
    } else if text.starts_with("trailing characters") {
        format!("invalid character '{offending}' after top-level value")
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_sets_keeps_and_deletes_keys() {
        let target = json!({"a": {"x": "1", "y": "2"}, "l": [1, 2]});
        let out = merge_patch(&target, &json!({"a": {"x": null, "z": "3"}, "l": [3]}));
        assert_eq!(out, json!({"a": {"y": "2", "z": "3"}, "l": [3]}));
    }

    #[test]
    fn strategic_patch_merges_containers_by_name() {
        let target = json!({"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "1"}], "args": ["x"]});
        let patch = json!({"containers": [{"name": "b", "image": "2"}, {"name": "c", "image": "3"}], "args": ["y"]});
        let out = strategic_merge_patch(&target, &patch).unwrap();
        assert_eq!(
            out,
            json!({"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "2"}, {"name": "c", "image": "3"}], "args": ["y"]})
        );
        let deleted = strategic_merge_patch(
            &out,
            &json!({"containers": [{"name": "a", "$patch": "delete"}]}),
        )
        .unwrap();
        assert_eq!(deleted["containers"].as_array().unwrap().len(), 2);
        let replaced = strategic_merge_patch(
            &json!({"m": {"a": 1}}),
            &json!({"m": {"$patch": "replace", "b": 2}}),
        )
        .unwrap();
        assert_eq!(replaced, json!({"m": {"b": 2}}));
    }

    #[test]
    fn json_patch_escapes_and_fails_on_missing_parents() {
        let target = json!({"metadata": {"annotations": {}}});
        let out = json_patch(
            &target,
            &[json!({"op": "add", "path": "/metadata/annotations/a~1b~0c", "value": "v"})],
        )
        .unwrap();
        assert_eq!(out["metadata"]["annotations"]["a/b~c"], "v");
        assert!(json_patch(
            &json!({}),
            &[json!({"op": "add", "path": "/a/b", "value": 1})]
        )
        .is_err());
        assert!(json_patch(
            &json!({"r": 1}),
            &[json!({"op": "test", "path": "/r", "value": 5})]
        )
        .is_err());
        let moved = json_patch(
            &json!({"a": 1}),
            &[json!({"op": "move", "from": "/a", "path": "/b"})],
        )
        .unwrap();
        assert_eq!(moved, json!({"b": 1}));
    }

    #[test]
    fn go_json_errors_read_like_go() {
        assert_eq!(
            go_json_error("{not json"),
            "invalid character 'n' looking for beginning of object key string"
        );
        assert_eq!(go_json_error(""), "unexpected end of JSON input");
    }
}
