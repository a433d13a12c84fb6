//! Enums as the templates read them. Tera can branch on an enum only by comparing its name
//! as a string; instead an enum field of a plan serializes as its name and one boolean per
//! variant, `{"name": "cp_async", "sync": false, "cp_async": true}`, so a template tests
//! `{% if p.copy.cp_async %}` and prints `{{ p.copy.name }}`. A field opts in with
//! `#[serde(serialize_with = "flags")]`.

use serde::ser::{SerializeMap, Serializer};

/// A fieldless enum the templates branch on: its variants and their names (which are the
/// flags' keys, so no variant may be called `name`).
pub trait TemplateEnum: Copy + PartialEq + 'static {
    const ALL: &'static [Self];
    fn name(self) -> &'static str;
}

/// Serializes `value` as its name and a flag per variant (see the module).
pub fn flags<T: TemplateEnum, S: Serializer>(value: &T, serializer: S) -> Result<S::Ok, S::Error> {
    let mut map = serializer.serialize_map(Some(T::ALL.len() + 1))?;
    map.serialize_entry("name", value.name())?;
    for variant in T::ALL {
        map.serialize_entry(variant.name(), &(variant == value))?;
    }
    map.end()
}

impl TemplateEnum for gemm_dsl::DType {
    const ALL: &'static [Self] = &gemm_dsl::DType::ALL;
    fn name(self) -> &'static str {
        gemm_dsl::DType::name(self)
    }
}

impl TemplateEnum for gemm_dsl::BiasAlong {
    const ALL: &'static [Self] = &gemm_dsl::BiasAlong::ALL;
    fn name(self) -> &'static str {
        gemm_dsl::BiasAlong::name(self)
    }
}

impl TemplateEnum for gemm_dsl::Activation {
    const ALL: &'static [Self] = &gemm_dsl::Activation::ALL;
    fn name(self) -> &'static str {
        gemm_dsl::Activation::name(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gemm_dsl::Activation;

    #[test]
    fn an_enum_is_its_name_and_one_flag_per_variant() {
        #[derive(serde::Serialize)]
        struct Plan {
            #[serde(serialize_with = "flags")]
            activation: Activation,
        }
        let value = tera::to_value(Plan {
            activation: Activation::Gelu,
        })
        .unwrap();
        let activation = &value["activation"];
        assert_eq!(activation["name"], "gelu");
        for variant in Activation::ALL {
            assert_eq!(
                activation[variant.name()],
                variant == Activation::Gelu,
                "{}",
                variant.name()
            );
        }
    }
}
