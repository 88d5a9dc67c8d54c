//! JSON Schemas of declared payloads: found, in the declaration's expansion, for the
//! types that implement `schemars::JsonSchema`, and checked against JSON from untyped
//! input (the dashboard's add form) before serde sees it.
//!
//! The checker covers what schemars writes for serde types: `type` (with `null` in a
//! list), `properties`, `required`, `additionalProperties`, `items`, `prefixItems`,
//! `enum`, `const`, `anyOf` / `oneOf` / `allOf`, local `$ref`s, and the numeric,
//! length and item-count bounds. `format` is not checked (serde is, after it).

use std::marker::PhantomData;

use serde_json::Value;

/// Where JSON does not follow a schema, and how.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason} (at `{at}`)")]
#[non_exhaustive]
pub struct SchemaError {
    /// A JSON pointer to the value at fault (`""` for the whole document).
    pub at: String,
    /// What is wrong.
    pub reason: String,
}

/// Finds out, in a non-generic context, whether `T: JsonSchema` (autoref
/// specialisation, as `DefaultProbe` does for `Default`).
#[doc(hidden)]
#[derive(Debug)]
pub struct SchemaProbe<T>(PhantomData<T>);

impl<T> SchemaProbe<T> {
    /// A probe for `T`.
    pub const fn new() -> Self {
        SchemaProbe(PhantomData)
    }
}

impl<T> Default for SchemaProbe<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// Chosen when `T: JsonSchema`.
#[doc(hidden)]
pub trait WithSchema {
    /// `T`'s schema.
    fn schema(&self) -> Option<Value>;
}

impl<T: schemars::JsonSchema> WithSchema for &SchemaProbe<T> {
    fn schema(&self) -> Option<Value> {
        Some(schemars::schema_for!(T).to_value())
    }
}

/// Chosen when `T` has no schema.
#[doc(hidden)]
pub trait NoSchema {
    /// None.
    fn schema(&self) -> Option<Value>;
}

impl<T> NoSchema for SchemaProbe<T> {
    fn schema(&self) -> Option<Value> {
        None
    }
}

/// Checks `value` against `schema`; the first mismatch found, with its place.
pub(crate) fn check_schema(schema: &Value, value: &Value) -> Result<(), SchemaError> {
    Checker { root: schema }.check(schema, value, "")
}

struct Checker<'a> {
    root: &'a Value,
}

/// Fails the check of the value at `at` for `reason`.
fn mismatch(at: &str, reason: String) -> Result<(), SchemaError> {
    Err(SchemaError {
        at: at.to_owned(),
        reason,
    })
}

impl<'a> Checker<'a> {
    fn check(&self, schema: &'a Value, value: &Value, at: &str) -> Result<(), SchemaError> {
        let schema = match schema {
            Value::Bool(true) => return Ok(()),
            Value::Bool(false) => return mismatch(at, "no value is allowed here".to_owned()),
            Value::Object(map) => map,
            _ => return Ok(()),
        };
        if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
            match self.resolve(reference) {
                Some(target) => self.check(target, value, at)?,
                None => {
                    return mismatch(at, format!("the schema's `$ref` {reference} is not local"))
                }
            }
        }
        if let Some(types) = schema.get("type") {
            let allowed: Vec<&str> = match types {
                Value::String(one) => vec![one.as_str()],
                Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            };
            if !allowed.is_empty() && !allowed.iter().any(|t| is_type(value, t)) {
                return mismatch(
                    at,
                    format!(
                        "expected {}, found {}",
                        allowed.join(" or "),
                        type_of(value)
                    ),
                );
            }
        }
        if let Some(Value::Array(options)) = schema.get("enum") {
            if !options.contains(value) {
                let listed: Vec<String> = options.iter().map(Value::to_string).collect();
                return mismatch(at, format!("expected one of {}", listed.join(", ")));
            }
        }
        if let Some(constant) = schema.get("const") {
            if constant != value {
                return mismatch(at, format!("expected {constant}"));
            }
        }
        self.check_bounds(schema, value, at)?;
        self.check_combinators(schema, value, at)?;
        match value {
            Value::Object(object) => self.check_object(schema, object, at),
            Value::Array(items) => self.check_array(schema, items, at),
            _ => Ok(()),
        }
    }

    fn resolve(&self, reference: &str) -> Option<&'a Value> {
        let pointer = reference.strip_prefix('#')?;
        self.root.pointer(pointer)
    }

    fn check_bounds(
        &self,
        schema: &serde_json::Map<String, Value>,
        value: &Value,
        at: &str,
    ) -> Result<(), SchemaError> {
        let bound = |key: &str| schema.get(key).and_then(Value::as_f64);
        if let Some(n) = value.as_f64() {
            if let Some(min) = bound("minimum").filter(|min| n < *min) {
                return mismatch(at, format!("{n} is below the minimum {min}"));
            }
            if let Some(max) = bound("maximum").filter(|max| n > *max) {
                return mismatch(at, format!("{n} is above the maximum {max}"));
            }
            if let Some(min) = bound("exclusiveMinimum").filter(|min| n <= *min) {
                return mismatch(at, format!("{n} must be above {min}"));
            }
            if let Some(max) = bound("exclusiveMaximum").filter(|max| n >= *max) {
                return mismatch(at, format!("{n} must be below {max}"));
            }
        }
        let count = |key: &str| schema.get(key).and_then(Value::as_u64);
        if let Some(text) = value.as_str() {
            let chars = text.chars().count() as u64;
            if let Some(min) = count("minLength").filter(|min| chars < *min) {
                return mismatch(at, format!("at least {min} characters, found {chars}"));
            }
            if let Some(max) = count("maxLength").filter(|max| chars > *max) {
                return mismatch(at, format!("at most {max} characters, found {chars}"));
            }
        }
        if let Some(items) = value.as_array() {
            let len = items.len() as u64;
            if let Some(min) = count("minItems").filter(|min| len < *min) {
                return mismatch(at, format!("at least {min} items, found {len}"));
            }
            if let Some(max) = count("maxItems").filter(|max| len > *max) {
                return mismatch(at, format!("at most {max} items, found {len}"));
            }
        }
        Ok(())
    }

    fn check_combinators(
        &self,
        schema: &'a serde_json::Map<String, Value>,
        value: &Value,
        at: &str,
    ) -> Result<(), SchemaError> {
        if let Some(Value::Array(all)) = schema.get("allOf") {
            for part in all {
                self.check(part, value, at)?;
            }
        }
        for key in ["anyOf", "oneOf"] {
            let Some(Value::Array(options)) = schema.get(key) else {
                continue;
            };
            let mut closest = None;
            let mut matched = 0;
            for option in options {
                match self.check(option, value, at) {
                    Ok(()) => matched += 1,
                    // The deepest complaint says most about what was meant.
                    Err(e) => {
                        if closest
                            .as_ref()
                            .is_none_or(|c: &SchemaError| e.at.len() > c.at.len())
                        {
                            closest = Some(e);
                        }
                    }
                }
            }
            if matched == 0 {
                return Err(closest.unwrap_or_else(|| SchemaError {
                    at: at.to_owned(),
                    reason: "matches none of the allowed shapes".to_owned(),
                }));
            }
            if key == "oneOf" && matched > 1 {
                return mismatch(at, "matches more than one of the allowed shapes".to_owned());
            }
        }
        Ok(())
    }

    fn check_object(
        &self,
        schema: &'a serde_json::Map<String, Value>,
        object: &serde_json::Map<String, Value>,
        at: &str,
    ) -> Result<(), SchemaError> {
        if let Some(Value::Array(required)) = schema.get("required") {
            for field in required.iter().filter_map(Value::as_str) {
                if !object.contains_key(field) {
                    return mismatch(at, format!("missing field `{field}`"));
                }
            }
        }
        let properties = schema.get("properties").and_then(Value::as_object);
        for (field, value) in object {
            let here = format!("{at}/{}", field.replace('~', "~0").replace('/', "~1"));
            match properties.and_then(|p| p.get(field)) {
                Some(property) => self.check(property, value, &here)?,
                None => match schema.get("additionalProperties") {
                    Some(Value::Bool(false)) => {
                        return mismatch(&here, format!("unknown field `{field}`"));
                    }
                    Some(extra @ Value::Object(_)) => self.check(extra, value, &here)?,
                    _ => {}
                },
            }
        }
        Ok(())
    }

    fn check_array(
        &self,
        schema: &'a serde_json::Map<String, Value>,
        items: &[Value],
        at: &str,
    ) -> Result<(), SchemaError> {
        let prefix = schema
            .get("prefixItems")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        for (index, item) in items.iter().enumerate() {
            let here = format!("{at}/{index}");
            match (prefix.get(index), schema.get("items")) {
                (Some(positional), _) => self.check(positional, item, &here)?,
                (None, Some(each)) => self.check(each, item, &here)?,
                (None, None) => {}
            }
        }
        Ok(())
    }
}

fn is_type(value: &Value, name: &str) -> bool {
    match name {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => {
            value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => true,
    }
}

fn type_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[allow(dead_code)]
    #[derive(schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct Welcome {
        to: String,
        user_id: u64,
        kind: Kind,
        tags: Vec<String>,
        note: Option<String>,
    }

    #[allow(dead_code)]
    #[derive(schemars::JsonSchema)]
    #[serde(rename_all = "lowercase")]
    enum Kind {
        First,
        Again,
    }

    fn schema() -> Value {
        schemars::schema_for!(Welcome).to_value()
    }

    fn at(value: Value) -> Result<(), SchemaError> {
        check_schema(&schema(), &value)
    }

    #[test]
    fn a_fitting_value_passes() {
        at(json!({"to": "a@b.c", "user_id": 4, "kind": "first", "tags": ["x"], "note": null}))
            .unwrap();
        at(json!({"to": "a@b.c", "user_id": 4, "kind": "again", "tags": []})).unwrap();
    }

    #[test]
    fn each_mismatch_names_its_place() {
        let base = json!({"to": "a@b.c", "user_id": 4, "kind": "first", "tags": []});
        let with = |pointer: &str, value: Value| {
            let mut v = base.clone();
            *v.pointer_mut(pointer).unwrap() = value;
            at(v).unwrap_err()
        };
        let e = with("/to", json!(5));
        assert_eq!(
            (e.at.as_str(), e.reason.as_str()),
            ("/to", "expected string, found integer")
        );
        let e = with("/user_id", json!(-1));
        assert_eq!(e.at, "/user_id");
        assert!(e.reason.contains("minimum"), "{e}");
        let e = with("/kind", json!("third"));
        assert_eq!(e.at, "/kind");
        let e = with("/tags", json!([1]));
        assert_eq!(e.at, "/tags/0");
        let mut missing = base.clone();
        missing.as_object_mut().unwrap().remove("to");
        assert_eq!(at(missing).unwrap_err().reason, "missing field `to`");
        let mut extra = base;
        extra["cc"] = json!("x");
        let e = at(extra).unwrap_err();
        assert_eq!(
            (e.at.as_str(), e.reason.as_str()),
            ("/cc", "unknown field `cc`")
        );
    }

    #[test]
    #[allow(clippy::needless_borrow)] // the probe picks its impl by the borrows
    fn the_probe_finds_a_schema_only_where_there_is_one() {
        #[allow(unused_imports)]
        use super::{NoSchema as _, WithSchema as _};
        struct Plain;
        assert!((&&SchemaProbe::<Welcome>::new()).schema().is_some());
        assert!((&&SchemaProbe::<Plain>::new()).schema().is_none());
    }
}
