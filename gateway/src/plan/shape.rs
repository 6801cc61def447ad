//! The response's shape: the client's selection, worked out per concrete type.
//!
//! GraphQL's field collection decides which fields an object's answer holds: the
//! fields of its selection set whose fragments' type conditions the object's type
//! satisfies, `@skip`/`@include` applied, fields that share a response key merged,
//! in the order each key first appears. For an object type that is one list of
//! fields; for an interface or union it depends on the object's concrete type, so
//! a [`Selection`] holds one [`Variant`] per type the position may hold, and the
//! response writer picks the one the object's `__typename` names.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use async_graphql_parser::types::{BaseType, SelectionSet, Type};
use async_graphql_parser::Pos;

use super::fields::{DocumentView, Merged};
use super::{PlanError, Sources};
use crate::supergraph::{base_name, Supergraph};

/// Most fields a plan's shape may hold, variants included (a document asking for
/// more is refused rather than planned without bound).
const MAX_SHAPE_FIELDS: usize = 200_000;

/// The selection for the objects at one position of the response.
#[derive(Debug)]
pub struct Selection {
    /// The position's type (an object, interface or union type).
    pub type_name: Arc<str>,
    /// Whether it is an interface or a union (then each object's `__typename`
    /// picks its variant).
    pub is_abstract: bool,
    /// One per object type the position may hold, sorted by name.
    pub variants: Vec<Variant>,
    /// At an interface or union, the fields every object there answers, whatever
    /// its type (those selected on the position's type itself), when every variant
    /// answers just those and `__typename` is not among them: then an object whose
    /// concrete type no answer names (the plan did not need it, or an interface
    /// object's answer names its interface) is written with these.
    pub common: Option<Variant>,
}

/// The fields an object of one concrete type answers.
#[derive(Debug)]
pub struct Variant {
    pub type_name: Arc<str>,
    /// Merged by response key, in query order.
    pub fields: Vec<OutField>,
}

/// One response key of a variant.
#[derive(Debug)]
pub struct OutField {
    /// The response key (alias or name).
    pub key: Box<str>,
    /// `"key":`, as the response writes it.
    pub key_json: Box<[u8]>,
    /// Whether one answer holds the value: a scalar or an enum value, not a list
    /// (objects and lists are merged from every answer at their place).
    pub single_source: bool,
    /// Where the writer found this field's value last time.
    pub hint: MemberHint,
    /// The fetches whose answers may hold it (set once the plan's fetches are
    /// known).
    pub sources: Sources,
    /// `Type.field`, for errors.
    pub coordinate: Box<str>,
    /// Where the field is in the document (for errors' `locations`).
    pub pos: Pos,
    /// Nullability per list level, outermost first.
    pub shape: Shape,
    pub kind: FieldKind,
}

impl OutField {
    fn new(key: &str, coordinate: Box<str>, pos: Pos, shape: Shape, kind: FieldKind) -> OutField {
        // Response keys are GraphQL names: nothing to escape.
        let key_json = format!("\"{key}\":").into_bytes().into_boxed_slice();
        let single_source =
            matches!(kind, FieldKind::Leaf(_) | FieldKind::Enum(_)) && !shape.is_list(0);
        OutField {
            key: key.into(),
            key_json,
            single_source,
            hint: MemberHint::default(),
            sources: Sources::ALL,
            coordinate,
            pos,
            shape,
            kind,
        }
    }
}

/// Where the response writer found a field's value the last time: which answer of
/// the object's view held it (its position in the view), and its position among
/// that answer's members. The objects at one place of a response are laid out alike
/// request after request (the same fetches, answering the same selections), so the
/// writer reads there first, and looks further only when the key it finds there is
/// not the field's ([`crate::execute::data::Data::hinted_member`]). Requests on
/// other threads share the hint: it is read and written with relaxed atomics (the
/// two positions packed in one word), and written only when it changes.
#[derive(Debug)]
pub struct MemberHint(AtomicU32);

impl MemberHint {
    /// No hint: the field was not found, or at positions too large to pack.
    const NONE: u32 = u32::MAX;
    /// The answer's position takes the top byte, the member's the rest.
    const ORDINAL_BITS: u32 = 24;
    const ORDINAL_MASK: u32 = (1 << Self::ORDINAL_BITS) - 1;

    /// The answer's position in the view, and the member's among its members.
    #[inline]
    pub fn get(&self) -> Option<(usize, u32)> {
        let packed = self.0.load(Ordering::Relaxed);
        (packed != Self::NONE).then_some((
            (packed >> Self::ORDINAL_BITS) as usize,
            packed & Self::ORDINAL_MASK,
        ))
    }

    pub fn set(&self, at: Option<(usize, u32)>) {
        let packed = match at {
            Some((answer, ordinal)) if answer < 0xff && ordinal < Self::ORDINAL_MASK => {
                ((answer as u32) << Self::ORDINAL_BITS) | ordinal
            }
            _ => Self::NONE,
        };
        if self.0.load(Ordering::Relaxed) != packed {
            self.0.store(packed, Ordering::Relaxed);
        }
    }
}

/// A copy starts from the same finding.
impl Clone for MemberHint {
    fn clone(&self) -> MemberHint {
        MemberHint(AtomicU32::new(self.0.load(Ordering::Relaxed)))
    }
}

impl Default for MemberHint {
    fn default() -> MemberHint {
        MemberHint(AtomicU32::new(MemberHint::NONE))
    }
}

/// What a field's value is made of.
#[derive(Debug)]
pub enum FieldKind {
    /// The object's type name, answered by the gateway.
    Typename,
    /// A scalar value, copied as the subgraph wrote it when it is of the scalar's kind.
    Leaf(Scalar),
    /// An enum value, copied as the subgraph wrote it when the public enum has it
    /// (a value the public schema hides, `@inaccessible`, is no value).
    Enum(Arc<[Box<str>]>),
    /// Objects, with their selection.
    Object(Box<Selection>),
    /// async-graphql's introspection answer (root selection only).
    Introspection,
}

/// A scalar type, as far as the response writer checks its values: a built-in one's
/// JSON kind (`Int` an integer within 32 bits, `ID` a string or an integer), a custom
/// one any value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scalar {
    Int,
    Float,
    String,
    Boolean,
    Id,
    Custom,
}

impl Scalar {
    pub fn of(name: &str) -> Scalar {
        match name {
            "Int" => Scalar::Int,
            "Float" => Scalar::Float,
            "String" => Scalar::String,
            "Boolean" => Scalar::Boolean,
            "ID" => Scalar::Id,
            _ => Scalar::Custom,
        }
    }
}

/// Whether null may stand at each list level of a type: `[Post]!` is `[false, true]`.
#[derive(Debug, Clone)]
pub struct Shape(pub Box<[bool]>);

impl Shape {
    pub fn nullable(&self, level: usize) -> bool {
        self.0.get(level).copied().unwrap_or(true)
    }

    /// Whether `level` is a list level (a deeper level follows).
    pub fn is_list(&self, level: usize) -> bool {
        level + 1 < self.0.len()
    }

    /// Nullability per list level of `ty`, outermost first.
    pub fn of(ty: &Type) -> Shape {
        let mut levels = Vec::with_capacity(2);
        let mut t = ty;
        loop {
            levels.push(t.nullable);
            match &t.base {
                BaseType::List(inner) => t = inner,
                BaseType::Named(_) => break,
            }
        }
        Shape(levels.into_boxed_slice())
    }
}

impl Selection {
    /// The variant for an object whose type is `concrete`.
    pub fn variant(&self, concrete: &str) -> Option<&Variant> {
        match self.variants.as_slice() {
            [only] if *only.type_name == *concrete => Some(only),
            variants => variants
                .binary_search_by(|v| (*v.type_name).cmp(concrete))
                .ok()
                .map(|i| &variants[i]),
        }
    }

    /// The variant when the position holds one object type only.
    pub fn only(&self) -> Option<&Variant> {
        match self.variants.as_slice() {
            [only] => Some(only),
            _ => None,
        }
    }

    /// Estimated heap bytes.
    pub fn heap_size(&self) -> usize {
        std::mem::size_of::<Selection>()
            + self.type_name.len()
            + self
                .variants
                .iter()
                .map(|v| {
                    std::mem::size_of::<Variant>()
                        + v.fields
                            .iter()
                            .map(|f| {
                                std::mem::size_of::<OutField>()
                                    + f.key.len()
                                    + f.coordinate.len()
                                    + f.shape.0.len()
                                    + match &f.kind {
                                        FieldKind::Object(s) => s.heap_size(),
                                        _ => 0,
                                    }
                            })
                            .sum::<usize>()
                })
                .sum::<usize>()
            + self
                .common
                .as_ref()
                .map_or(0, |c| c.fields.len() * std::mem::size_of::<OutField>())
    }
}

/// Builds shapes, counting the fields against [`MAX_SHAPE_FIELDS`].
pub struct Shaper<'a> {
    pub supergraph: &'a Supergraph,
    pub view: DocumentView<'a>,
    fields: usize,
    enums: std::collections::HashMap<String, Arc<[Box<str>]>>,
}

impl<'a> Shaper<'a> {
    pub fn new(supergraph: &'a Supergraph, view: DocumentView<'a>) -> Shaper<'a> {
        Shaper {
            supergraph,
            view,
            fields: 0,
            enums: Default::default(),
        }
    }

    /// The root selection of the operation (type `root_type`), and the response
    /// keys of its introspection fields.
    pub fn root(
        &mut self,
        root_type: &str,
        set: &'a SelectionSet,
    ) -> Result<(Selection, Vec<&'a str>), PlanError> {
        let mut introspection = Vec::new();
        let merged = self.merged(root_type, &[set]);
        let mut fields = Vec::with_capacity(merged.len());
        for m in merged {
            match m.field.name.node.as_str() {
                name @ ("__schema" | "__type") => {
                    introspection.push(m.key);
                    fields.push(OutField::new(
                        m.key,
                        format!("{root_type}.{name}").into(),
                        position(&m),
                        Shape(Box::new([name == "__type"])),
                        FieldKind::Introspection,
                    ));
                }
                _ => fields.push(self.field(root_type, &m)?),
            }
        }
        let name: Arc<str> = root_type.into();
        let selection = Selection {
            type_name: name.clone(),
            variants: vec![Variant {
                type_name: name,
                fields,
            }],
            is_abstract: false,
            common: None,
        };
        Ok((selection, introspection))
    }

    /// The selection of `sets` for objects of type `ty`.
    fn selection(&mut self, ty: &str, sets: &[&'a SelectionSet]) -> Result<Selection, PlanError> {
        let supergraph = self.supergraph;
        let concrete: Vec<&str> = if supergraph.is_abstract(ty) {
            supergraph
                .possible_types(ty)
                .iter()
                .map(String::as_str)
                .collect()
        } else {
            vec![ty]
        };
        let mut variants = Vec::with_capacity(concrete.len());
        for c in concrete {
            let merged = self.merged(c, sets);
            let mut fields = Vec::with_capacity(merged.len());
            for m in merged {
                fields.push(self.field(c, &m)?);
            }
            variants.push(Variant {
                type_name: c.into(),
                fields,
            });
        }
        variants.sort_by(|a, b| a.type_name.cmp(&b.type_name));
        let common = if supergraph.is_abstract(ty) {
            let interfaces: Vec<String> = supergraph
                .fields_of(ty)
                .map(|o| o.implements.clone())
                .unwrap_or_default();
            let merged = self.view.merged(
                &|on: &str| on == ty || interfaces.iter().any(|i| i == on),
                sets,
            );
            let mut fields = Vec::with_capacity(merged.len());
            for m in merged {
                fields.push(self.field(ty, &m)?);
            }
            // `__typename` needs the concrete type: no common variant answers it.
            let uniform = !fields.iter().any(|f| matches!(f.kind, FieldKind::Typename))
                && variants.iter().all(|v| {
                    v.fields.len() == fields.len()
                        && v.fields.iter().zip(&fields).all(|(a, b)| a.key == b.key)
                });
            uniform.then(|| Variant {
                type_name: ty.into(),
                fields,
            })
        } else {
            None
        };
        Ok(Selection {
            type_name: ty.into(),
            is_abstract: supergraph.is_abstract(ty),
            variants,
            common,
        })
    }

    /// The values of the public enum `ty` (sorted), once per enum.
    fn enum_values(&mut self, ty: &str) -> Option<Arc<[Box<str>]>> {
        if let Some(values) = self.enums.get(ty) {
            return Some(values.clone());
        }
        let crate::supergraph::Kind::Enum(values) = &self.supergraph.types.get(ty)?.kind else {
            return None;
        };
        let mut names: Vec<Box<str>> = values.iter().map(|v| v.name.as_str().into()).collect();
        names.sort();
        let names: Arc<[Box<str>]> = names.into();
        self.enums.insert(ty.to_string(), names.clone());
        Some(names)
    }

    fn merged(&self, concrete: &str, sets: &[&'a SelectionSet]) -> Vec<Merged<'a>> {
        let supergraph = self.supergraph;
        self.view
            .merged(&|on: &str| supergraph.satisfies(concrete, on), sets)
    }

    /// One merged field of an object of type `ty`.
    fn field(&mut self, ty: &str, m: &Merged<'a>) -> Result<OutField, PlanError> {
        self.fields += 1;
        if self.fields > MAX_SHAPE_FIELDS {
            return Err(PlanError(format!(
                "the response would have more than {MAX_SHAPE_FIELDS} fields across its types"
            )));
        }
        let name = m.field.name.node.as_str();
        let coordinate: Box<str> = format!("{ty}.{name}").into();
        if name == "__typename" {
            return Ok(OutField::new(
                m.key,
                coordinate,
                position(m),
                Shape(Box::new([false])),
                FieldKind::Typename,
            ));
        }
        let def = self
            .supergraph
            .field(ty, name)
            .ok_or_else(|| PlanError(format!("{ty} has no field {name}")))?;
        let base = base_name(&def.ty);
        let kind = if self.supergraph.is_composite(base) {
            FieldKind::Object(Box::new(self.selection(base, &m.sets)?))
        } else if let Some(values) = self.enum_values(base) {
            FieldKind::Enum(values)
        } else {
            FieldKind::Leaf(Scalar::of(base))
        };
        Ok(OutField::new(
            m.key,
            coordinate,
            position(m),
            Shape::of(&def.ty),
            kind,
        ))
    }
}

/// Where a field starts in the document: its alias, or its name.
fn position(m: &Merged<'_>) -> Pos {
    m.field.alias.as_ref().map_or(m.field.name.pos, |a| a.pos)
}

#[cfg(test)]
mod tests {
    use super::MemberHint;

    #[test]
    fn a_hint_keeps_both_positions_or_none() {
        let hint = MemberHint::default();
        assert_eq!(hint.get(), None);
        hint.set(Some((2, 7)));
        assert_eq!(hint.get(), Some((2, 7)));
        hint.set(Some((0, (1 << 24) - 2)));
        assert_eq!(hint.get(), Some((0, (1 << 24) - 2)));
        // Positions too large to pack leave no hint rather than a wrong one.
        hint.set(Some((255, 1)));
        assert_eq!(hint.get(), None);
        hint.set(Some((1, 1 << 24)));
        assert_eq!(hint.get(), None);
        hint.set(None);
        assert_eq!(hint.get(), None);
    }
}
