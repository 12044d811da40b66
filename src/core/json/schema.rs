//! The plan document of SPEC §8 as types, read by serde straight from the
//! text (no `serde_json::Value` tree of the whole plan is ever built).
//!
//! A plan is untrusted, and its errors are reported in node order, quoting
//! the value at fault. So reading never fails on what the text holds, only
//! on text that is not JSON: a field is a [`Field`], holding the value when
//! it has the schema's type and, when it has not, the JSON value itself
//! (kept for the message, in the rare case it is there). Checking is then
//! one pass over the typed nodes (`super::check`), in order.
//!
//! Keys are matched by derived field identifiers; with duplicate keys the
//! last wins, as in `JSON.parse`. A node's `kind` may come after its other
//! fields, so a node is read as all of them and then becomes the variant
//! of [`Node`] its kind names.
//!
//! Why the structs are not `#[derive(Deserialize)]`, nor `Node`
//! `#[serde(tag = "kind")]`: a derived struct refuses a duplicate key; an
//! internally tagged enum first buffers each node whole in serde's
//! `Content`; and both stop at the first value of the wrong type, in
//! serde's words, before the rest of the text is known to be JSON. The
//! messages of SPEC §8 instead name the first node at fault and quote the
//! value there, and text that is not JSON is refused as such wherever the
//! fault. Serde's own errors are thus only ever about the JSON itself, and
//! `super::messages::invalid_json` words them.

use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use smallvec::SmallVec;
use std::fmt;
use std::marker::PhantomData;

use super::super::op::Op;

// ---------------------------------------------------------------- fields

/// A field as the text gives it.
#[derive(Debug, Default)]
pub enum Field<T> {
    #[default]
    Absent,
    /// A value of the schema's type.
    Is(T),
    /// Any other JSON value, for the message that quotes it.
    Not(Box<Value>),
}

/// How a type of the schema is read from each kind of JSON value; `None`
/// (or, for arrays and objects, `Field::Not`) when it is not of the type.
pub trait Lenient: Sized {
    fn number(_: f64) -> Option<Self> {
        None
    }
    fn string(_: &str) -> Option<Self> {
        None
    }
    fn boolean(_: bool) -> Option<Self> {
        None
    }
    fn null() -> Option<Self> {
        None
    }
    fn seq<'de, A: SeqAccess<'de>>(seq: A) -> Result<Field<Self>, A::Error> {
        not(Value::deserialize(SeqAccessDeserializer::new(seq))?)
    }
    fn map<'de, A: MapAccess<'de>>(map: A) -> Result<Field<Self>, A::Error> {
        not(Value::deserialize(MapAccessDeserializer::new(map))?)
    }
}

/// Read past the value of a key the schema does not have. It is read as a
/// value all the same (not as `IgnoredAny`, which skips numbers and strings
/// without checking them), so that the same texts are refused as invalid
/// JSON, at the same byte, whatever their keys.
fn skip<'de, A: MapAccess<'de>>(map: &mut A) -> Result<(), A::Error> {
    map.next_value::<Value>().map(drop)
}

fn not<T, E>(v: Value) -> Result<Field<T>, E> {
    Ok(Field::Not(Box::new(v)))
}

/// A schema type that messages may quote, as the JSON value it was read from.
pub trait Quoted {
    fn to_value(&self) -> Value;
}

impl<T: Quoted> Field<T> {
    /// The JSON value, or `None` when absent (printed as `undefined`).
    pub fn value(&self) -> Option<Value> {
        match self {
            Field::Absent => None,
            Field::Is(x) => Some(x.to_value()),
            Field::Not(v) => Some((**v).clone()),
        }
    }
}

impl<'de, T: Lenient> Deserialize<'de> for Field<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(FieldVisitor(PhantomData))
    }
}

struct FieldVisitor<T>(PhantomData<T>);

impl<T> FieldVisitor<T> {
    fn or(x: Option<T>, v: impl FnOnce() -> Value) -> Field<T> {
        x.map_or_else(|| Field::Not(Box::new(v())), Field::Is)
    }
}

impl<'de, T: Lenient> Visitor<'de> for FieldVisitor<T> {
    type Value = Field<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, b: bool) -> Result<Field<T>, E> {
        Ok(Self::or(T::boolean(b), || Value::Bool(b)))
    }
    fn visit_u64<E>(self, x: u64) -> Result<Field<T>, E> {
        Ok(Self::or(T::number(x as f64), || Value::from(x)))
    }
    fn visit_i64<E>(self, x: i64) -> Result<Field<T>, E> {
        Ok(Self::or(T::number(x as f64), || Value::from(x)))
    }
    fn visit_f64<E>(self, x: f64) -> Result<Field<T>, E> {
        Ok(Self::or(T::number(x), || Value::from(x)))
    }
    fn visit_str<E>(self, s: &str) -> Result<Field<T>, E> {
        Ok(Self::or(T::string(s), || Value::String(s.to_owned())))
    }
    fn visit_unit<E>(self) -> Result<Field<T>, E> {
        Ok(Self::or(T::null(), || Value::Null))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Field<T>, A::Error> {
        T::seq(seq)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Field<T>, A::Error> {
        T::map(map)
    }
}

// ---------------------------------------------------------------- scalars

impl Lenient for f64 {
    fn number(x: f64) -> Option<f64> {
        Some(x)
    }
    /// JSON text cannot hold -0; compileFromJSON writes it as a string.
    fn string(s: &str) -> Option<f64> {
        (s == "-0").then_some(-0.0)
    }
}

impl Quoted for f64 {
    fn to_value(&self) -> Value {
        Value::from(*self)
    }
}

impl Lenient for bool {
    fn boolean(b: bool) -> Option<bool> {
        Some(b)
    }
}

impl Quoted for bool {
    fn to_value(&self) -> Value {
        Value::Bool(*self)
    }
}

impl Lenient for String {
    fn string(s: &str) -> Option<String> {
        Some(s.to_owned())
    }
}

impl Quoted for String {
    fn to_value(&self) -> Value {
        Value::String(self.clone())
    }
}

/// An array of numbers (a shape, parents, a reshape's or a slice's
/// arguments), held without allocating when it has at most two.
#[derive(Debug, Default)]
pub struct Numbers(pub SmallVec<[f64; 2]>);

impl Lenient for Numbers {
    fn seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<Field<Numbers>, A::Error> {
        let mut xs = SmallVec::new();
        while let Some(item) = seq.next_element::<Field<f64>>()? {
            match item {
                Field::Is(x) => xs.push(x),
                // Not all numbers: the array as it is, for the message.
                Field::Not(v) => {
                    let mut items: Vec<Value> = xs.iter().map(|&x: &f64| x.to_value()).collect();
                    items.push(*v);
                    while let Some(v) = seq.next_element::<Value>()? {
                        items.push(v);
                    }
                    return not(Value::Array(items));
                }
                Field::Absent => unreachable!("an array item is present"),
            }
        }
        Ok(Field::Is(Numbers(xs)))
    }
}

impl Quoted for Numbers {
    fn to_value(&self) -> Value {
        Value::Array(self.0.iter().map(Quoted::to_value).collect())
    }
}

/// A constant's data: numbers, and the strings and nulls that stand for the
/// numbers JSON cannot hold (SPEC §8).
#[derive(Debug, Default)]
pub struct Data {
    pub values: Vec<f64>,
    /// How many entries the array has, whether numbers or not.
    pub len: usize,
    /// The first entry that is not a number, and where it is.
    pub first_bad: Option<(usize, Value)>,
}

struct Datum(f64);

impl Lenient for Datum {
    fn number(x: f64) -> Option<Datum> {
        Some(Datum(x))
    }
    /// `JSON.stringify` writes NaN and ±Infinity as null.
    fn null() -> Option<Datum> {
        Some(Datum(f64::NAN))
    }
    /// As compileFromJSON writes them.
    fn string(s: &str) -> Option<Datum> {
        Some(Datum(match s {
            "NaN" => f64::NAN,
            "Infinity" => f64::INFINITY,
            "-Infinity" => f64::NEG_INFINITY,
            "-0" => -0.0,
            _ => return None,
        }))
    }
}

impl Lenient for Data {
    fn seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<Field<Data>, A::Error> {
        let mut data = Data::default();
        while let Some(item) = seq.next_element::<Field<Datum>>()? {
            match item {
                Field::Is(Datum(x)) if data.first_bad.is_none() => data.values.push(x),
                Field::Not(v) if data.first_bad.is_none() => data.first_bad = Some((data.len, *v)),
                _ => {}
            }
            data.len += 1;
        }
        Ok(Field::Is(data))
    }
}

impl<T: for<'de> Deserialize<'de>> Lenient for Vec<T> {
    fn seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<Field<Vec<T>>, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Field::Is(items))
    }
}

// ---------------------------------------------------------------- the document

/// A plan document (SPEC §8): versions 1 and 2 differ in `input`, absent
/// from version 1, and in `input` nodes, which only version 2 has.
#[derive(Debug, Default)]
pub struct PlanDoc {
    pub version: Field<f64>,
    pub nodes: Field<Vec<Field<Node>>>,
    pub root: Field<f64>,
    /// `"map"` or `"single"`.
    pub input: Field<String>,
}

#[derive(serde::Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum PlanKey {
    Version,
    Nodes,
    Root,
    Input,
    #[serde(other)]
    Other,
}

impl Lenient for PlanDoc {
    fn map<'de, A: MapAccess<'de>>(mut map: A) -> Result<Field<PlanDoc>, A::Error> {
        let mut doc = PlanDoc::default();
        while let Some(key) = map.next_key()? {
            match key {
                PlanKey::Version => doc.version = map.next_value()?,
                PlanKey::Nodes => doc.nodes = map.next_value()?,
                PlanKey::Root => doc.root = map.next_value()?,
                PlanKey::Input => doc.input = map.next_value()?,
                PlanKey::Other => skip(&mut map)?,
            }
        }
        Ok(Field::Is(doc))
    }
}

/// A node, by its `kind` (SPEC §8):
///
/// ```text
/// { kind: 'param', name?: string, shape }
/// { kind: 'input', name: string, shape }          (version 2 only)
/// { kind: 'const', shape, data: number[] }
/// { kind: 'op', op: string, parents: number[], args?: any[], list?: true }
/// ```
#[derive(Debug)]
pub enum Node {
    Param { name: Field<String>, shape: Field<Numbers> },
    Input { name: Field<String>, shape: Field<Numbers> },
    Const { shape: Field<Numbers>, data: Field<Data> },
    Op { op: Field<OpName>, parents: Field<Numbers>, args: Field<Vec<Field<Arg>>>, list: Field<bool> },
    /// No kind, or none of the four (the value, for the message).
    Unknown { kind: Option<Value> },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Param,
    Input,
    Const,
    Op,
}

impl Lenient for Kind {
    fn string(s: &str) -> Option<Kind> {
        Some(match s {
            "param" => Kind::Param,
            "input" => Kind::Input,
            "const" => Kind::Const,
            "op" => Kind::Op,
            _ => return None,
        })
    }
}

/// The name of an op a plan may hold (every op but the leaves and hand-built
/// nodes), or another string.
#[derive(Debug)]
pub enum OpName {
    Known(&'static str),
    Unknown(String),
}

impl Lenient for OpName {
    fn string(s: &str) -> Option<OpName> {
        Some(match Op::ALL.iter().find(|op| op.is_pure() && op.name() == s) {
            Some(op) => OpName::Known(op.name()),
            None => OpName::Unknown(s.to_owned()),
        })
    }
}

impl Quoted for OpName {
    fn to_value(&self) -> Value {
        match self {
            OpName::Known(name) => Value::String((*name).to_owned()),
            OpName::Unknown(name) => Value::String(name.clone()),
        }
    }
}

#[derive(serde::Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum NodeKey {
    Kind,
    Name,
    Shape,
    Data,
    Op,
    Parents,
    Args,
    List,
    #[serde(other)]
    Other,
}

impl Lenient for Node {
    fn map<'de, A: MapAccess<'de>>(mut map: A) -> Result<Field<Node>, A::Error> {
        let mut kind = Field::<Kind>::Absent;
        let (mut name, mut shape, mut data) = (Field::Absent, Field::Absent, Field::Absent);
        let (mut op, mut parents, mut args, mut list) = (Field::Absent, Field::Absent, Field::Absent, Field::Absent);
        while let Some(key) = map.next_key()? {
            match key {
                NodeKey::Kind => kind = map.next_value()?,
                NodeKey::Name => name = map.next_value()?,
                NodeKey::Shape => shape = map.next_value()?,
                NodeKey::Data => data = map.next_value()?,
                NodeKey::Op => op = map.next_value()?,
                NodeKey::Parents => parents = map.next_value()?,
                NodeKey::Args => args = map.next_value()?,
                NodeKey::List => list = map.next_value()?,
                NodeKey::Other => skip(&mut map)?,
            }
        }
        Ok(Field::Is(match kind {
            Field::Is(Kind::Param) => Node::Param { name, shape },
            Field::Is(Kind::Input) => Node::Input { name, shape },
            Field::Is(Kind::Const) => Node::Const { shape, data },
            Field::Is(Kind::Op) => Node::Op { op, parents, args, list },
            Field::Absent => Node::Unknown { kind: None },
            Field::Not(v) => Node::Unknown { kind: Some(*v) },
        }))
    }
}

/// A static argument of an op (SPEC §8): `pow`'s exponent, `reshape`'s
/// shape, `slice`'s start and size, the options object of
/// `triangularSolve` and `concat`. Which op it belongs to is known only
/// once the whole node is read.
#[derive(Debug)]
pub enum Arg {
    Number(f64),
    Numbers(Numbers),
    Options(Options),
}

/// `{lower}` for `triangularSolve`, `{axis}` for `concat`.
#[derive(Debug, Default)]
pub struct Options {
    pub lower: Field<bool>,
    pub axis: Field<f64>,
}

#[derive(serde::Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum OptionsKey {
    Lower,
    Axis,
    #[serde(other)]
    Other,
}

impl Lenient for Arg {
    fn number(x: f64) -> Option<Arg> {
        Some(Arg::Number(x))
    }
    fn string(s: &str) -> Option<Arg> {
        f64::string(s).map(Arg::Number)
    }
    fn seq<'de, A: SeqAccess<'de>>(seq: A) -> Result<Field<Arg>, A::Error> {
        Ok(match Numbers::seq(seq)? {
            Field::Is(xs) => Field::Is(Arg::Numbers(xs)),
            Field::Not(v) => Field::Not(v),
            Field::Absent => Field::Absent,
        })
    }
    fn map<'de, A: MapAccess<'de>>(mut map: A) -> Result<Field<Arg>, A::Error> {
        let mut o = Options::default();
        while let Some(key) = map.next_key()? {
            match key {
                OptionsKey::Lower => o.lower = map.next_value()?,
                OptionsKey::Axis => o.axis = map.next_value()?,
                OptionsKey::Other => skip(&mut map)?,
            }
        }
        Ok(Field::Is(Arg::Options(o)))
    }
}

impl Quoted for Arg {
    fn to_value(&self) -> Value {
        match self {
            Arg::Number(x) => x.to_value(),
            Arg::Numbers(xs) => xs.to_value(),
            Arg::Options(o) => {
                let mut m = Map::new();
                if let Some(v) = o.lower.value() {
                    m.insert("lower".into(), v);
                }
                if let Some(v) = o.axis.value() {
                    m.insert("axis".into(), v);
                }
                Value::Object(m)
            }
        }
    }
}
