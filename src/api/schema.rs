//! Schema shapes that client generators read as intended.
//!
//! poem-openapi publishes a field whose type is a named schema and that has its own keywords (a
//! description, `nullable`, a default) as `allOf: [{$ref}, {description, nullable, …}]`, with the
//! keywords repeated beside the `allOf`. OpenAPI 3.0 allows it, but the second member has no
//! type: openapi-python-client refuses the whole schema ("Invalid property in union", and drops
//! `POST /v1/generate`), and openapi-typescript types the field as `ModelName & unknown`. The
//! form generators agree on is a one-member `allOf` with the keywords beside it, which is what
//! [`Referenced`] publishes.

use std::borrow::Cow;

use poem_openapi::registry::{MetaSchema, MetaSchemaRef, Registry};
use poem_openapi::types::{ParseFromJSON, ParseFromParameter, ParseResult, ToJSON, Type};
use serde_json::Value;

/// A field of a named schema type `T`, published as `{"allOf": [{"$ref": T}], …the field's own
/// keywords}`; it reads and writes exactly as `T`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Referenced<T>(pub T);

impl<T: Type> Type for Referenced<T> {
    const IS_REQUIRED: bool = T::IS_REQUIRED;
    type RawValueType = T::RawValueType;
    type RawElementValueType = T::RawElementValueType;

    fn name() -> Cow<'static, str> {
        T::name()
    }

    fn schema_ref() -> MetaSchemaRef {
        MetaSchemaRef::Inline(Box::new(MetaSchema {
            all_of: vec![T::schema_ref()],
            ..MetaSchema::ANY
        }))
    }

    fn register(registry: &mut Registry) {
        T::register(registry);
    }

    fn as_raw_value(&self) -> Option<&Self::RawValueType> {
        self.0.as_raw_value()
    }

    fn raw_element_iter<'a>(
        &'a self,
    ) -> Box<dyn Iterator<Item = &'a Self::RawElementValueType> + 'a> {
        self.0.raw_element_iter()
    }
}

impl<T: ParseFromJSON> ParseFromJSON for Referenced<T> {
    fn parse_from_json(value: Option<Value>) -> ParseResult<Self> {
        T::parse_from_json(value)
            .map(Referenced)
            .map_err(poem_openapi::types::ParseError::propagate)
    }
}

impl<T: ToJSON> ToJSON for Referenced<T> {
    fn to_json(&self) -> Option<Value> {
        self.0.to_json()
    }
}

/// A text query parameter published as required (so generated clients ask for it) whose absence
/// the handler reports itself, with the field's own error code rather than a generic parse
/// error; at most `MAX` characters (published as `maxLength`, checked by the handler).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequiredText<const MAX: usize>(pub Option<String>);

impl<const MAX: usize> Type for RequiredText<MAX> {
    const IS_REQUIRED: bool = true;
    type RawValueType = String;
    type RawElementValueType = String;

    fn name() -> Cow<'static, str> {
        "string".into()
    }

    fn schema_ref() -> MetaSchemaRef {
        MetaSchemaRef::Inline(Box::new(MetaSchema {
            min_length: Some(1),
            max_length: Some(MAX),
            ..MetaSchema::new("string")
        }))
    }

    fn as_raw_value(&self) -> Option<&String> {
        self.0.as_ref()
    }

    fn raw_element_iter<'a>(&'a self) -> Box<dyn Iterator<Item = &'a String> + 'a> {
        Box::new(self.0.iter())
    }
}

impl<const MAX: usize> ParseFromParameter for RequiredText<MAX> {
    fn parse_from_parameter(value: &str) -> ParseResult<Self> {
        Ok(RequiredText(Some(value.to_string())))
    }

    fn parse_from_parameters<I: IntoIterator<Item = A>, A: AsRef<str>>(
        iter: I,
    ) -> ParseResult<Self> {
        Ok(RequiredText(
            iter.into_iter().next().map(|v| v.as_ref().to_string()),
        ))
    }
}

#[cfg(test)]
mod tests {
    use poem_openapi::Object;

    use super::*;

    #[derive(Object, Debug)]
    struct Inner {
        a: u32,
    }

    #[derive(Object, Debug)]
    struct Outer {
        /// Described.
        #[oai(nullable)]
        inner: Option<Referenced<Inner>>,
    }

    #[test]
    fn a_referenced_field_is_a_one_member_all_of_with_its_keywords_beside_it() {
        let registry = {
            let mut r = Registry::new();
            Outer::register(&mut r);
            r
        };
        let outer = &registry.schemas["Outer"];
        let field = &outer
            .properties
            .iter()
            .find(|(n, _)| *n == "inner")
            .unwrap()
            .1;
        let MetaSchemaRef::Inline(schema) = field else {
            panic!("inline schema expected")
        };
        assert_eq!(
            schema.all_of,
            vec![MetaSchemaRef::Reference("Inner".into())]
        );
        assert_eq!(schema.description, Some("Described."));
        assert!(schema.nullable);
        // Reads and writes as the inner type.
        let parsed = Outer::parse_from_json(Some(serde_json::json!({"inner": {"a": 7}}))).unwrap();
        assert_eq!(parsed.inner.as_ref().unwrap().0.a, 7);
        assert_eq!(
            parsed.to_json().unwrap(),
            serde_json::json!({"inner": {"a": 7}})
        );
    }
}
