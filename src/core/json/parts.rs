//! A plan object as JavaScript encodes it for the core (src/js/parts.js),
//! read into the same typed document as its JSON text: the numbers in one
//! stream, the strings (names and op names) as a JSON array of strings.
//! JavaScript encodes only an object each of whose fields has the schema's
//! type (anything else goes as text), so every field here is present and
//! well typed, or absent where the schema allows it; the checks that follow
//! are the text's, with the same messages.
//!
//! The stream, each count followed by what it counts:
//!
//! ```text
//! version, root, input (-1 absent, else a string), node count, nodes:
//!   0 (param), name (-1 absent, else a string), shape
//!   1 (input), name, shape
//!   2 (const), shape, data
//!   3 (op),    op name (a string), parents, list (-1 absent, 0, 1), args
//! a list (shape, parents, data): its length, then its numbers
//! args: -1 when absent, else their count, then each one:
//!   0, a number | 1, a list | 2, lower (-1 absent, 0, 1), 0 or 1, axis
//! ```

use super::schema::{Arg, Data, Field, Lenient, Node, Numbers, OpName, Options, PlanDoc};
use crate::core::error::Result;
use serde_json::Value;
use crate::fail;

/// The document `stream` and `strings` encode.
pub fn document(stream: &[f64], strings: &str) -> Result<PlanDoc> {
    // Read as a `Value`, whose reader the text path has already: a reader
    // of its own for `Vec<String>` cost the WebAssembly build 10s of KiB.
    let Ok(Value::Array(strings)) = serde_json::from_str::<Value>(strings) else { return malformed() };
    let mut r = Reader { stream, at: 0, strings: &strings };
    let version = r.number()?;
    let root = r.number()?;
    let input = r.string_or_absent()?;
    let n = r.count()?;
    let mut nodes = Vec::with_capacity(n.min(stream.len()));
    for _ in 0..n {
        nodes.push(Field::Is(r.node()?));
    }
    if r.at != stream.len() {
        return malformed();
    }
    Ok(PlanDoc { version: Field::Is(version), nodes: Field::Is(nodes), root: Field::Is(root), input })
}

fn malformed<T>() -> Result<T> {
    fail!("compileFromJSON: the encoded plan is malformed")
}

struct Reader<'a> {
    stream: &'a [f64],
    at: usize,
    strings: &'a [Value],
}

impl Reader<'_> {
    fn number(&mut self) -> Result<f64> {
        let Some(&x) = self.stream.get(self.at) else { return malformed() };
        self.at += 1;
        Ok(x)
    }

    /// A count of what follows, at most what is left of the stream.
    fn count(&mut self) -> Result<usize> {
        let x = self.number()?;
        if !(x >= 0.0 && x.fract() == 0.0 && x <= (self.stream.len() - self.at) as f64) {
            return malformed();
        }
        Ok(x as usize)
    }

    /// -1 for absent, 0 or 1.
    fn tag(&mut self) -> Result<Option<bool>> {
        match self.number()? {
            -1.0 => Ok(None),
            0.0 => Ok(Some(false)),
            1.0 => Ok(Some(true)),
            _ => malformed(),
        }
    }

    fn string_or_absent(&mut self) -> Result<Field<String>> {
        let x = self.number()?;
        if x == -1.0 {
            return Ok(Field::Absent);
        }
        match self.strings.get(x as usize) {
            Some(Value::String(s)) if x >= 0.0 && x.fract() == 0.0 => Ok(Field::Is(s.clone())),
            _ => malformed(),
        }
    }

    fn list(&mut self) -> Result<&[f64]> {
        let n = self.count()?;
        let xs = &self.stream[self.at..self.at + n];
        self.at += n;
        Ok(xs)
    }

    fn numbers(&mut self) -> Result<Field<Numbers>> {
        Ok(Field::Is(Numbers(self.list()?.iter().copied().collect())))
    }

    fn node(&mut self) -> Result<Node> {
        Ok(match self.number()? {
            0.0 => Node::Param { name: self.string_or_absent()?, shape: self.numbers()? },
            1.0 => Node::Input { name: self.string_or_absent()?, shape: self.numbers()? },
            2.0 => {
                let shape = self.numbers()?;
                let values = self.list()?.to_vec();
                Node::Const { shape, data: Field::Is(Data { len: values.len(), values, first_bad: None }) }
            }
            3.0 => {
                let Field::Is(name) = self.string_or_absent()? else { return malformed() };
                let Some(op) = OpName::string(&name) else { return malformed() };
                let op = Field::Is(op);
                let parents = self.numbers()?;
                let list = self.tag()?.map_or(Field::Absent, Field::Is);
                let args = match self.number()? {
                    -1.0 => Field::Absent,
                    _ => {
                        self.at -= 1;
                        let n = self.count()?;
                        let mut args = Vec::with_capacity(n);
                        for _ in 0..n {
                            args.push(Field::Is(self.arg()?));
                        }
                        Field::Is(args)
                    }
                };
                Node::Op { op, parents, args, list }
            }
            _ => return malformed(),
        })
    }

    fn arg(&mut self) -> Result<Arg> {
        Ok(match self.number()? {
            0.0 => Arg::Number(self.number()?),
            1.0 => Arg::Numbers(Numbers(self.list()?.iter().copied().collect())),
            2.0 => {
                let lower = self.tag()?.map_or(Field::Absent, Field::Is);
                let axis = match self.tag()? {
                    Some(true) => Field::Is(self.number()?),
                    Some(false) => Field::Absent,
                    None => return malformed(),
                };
                Arg::Options(Options { lower, axis })
            }
            _ => return malformed(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::plan_from_parts;

    /// x · 2 as JavaScript encodes it: a param, a const, an op.
    const STREAM: [f64; 18] = [2.0, 2.0, 0.0, 3.0, 0.0, -1.0, 0.0, 2.0, 0.0, 1.0, 2.0, 3.0, 1.0, 2.0, 0.0, 1.0, -1.0, -1.0];
    const STRINGS: &str = r#"["single","mul"]"#;

    #[test]
    fn an_encoded_plan_rebuilds() {
        let mut plan = plan_from_parts(&STREAM, STRINGS).unwrap();
        plan.set(0, &[1.5]).unwrap();
        assert_eq!(plan.forward().unwrap(), &[3.0]);
    }

    /// The binding is internal, but a stream cut short or garbled anywhere
    /// must give an error (or another plan), never a panic or a hang.
    #[test]
    fn a_malformed_stream_is_refused() {
        for end in 0..STREAM.len() {
            let error = plan_from_parts(&STREAM[..end], STRINGS).err().expect("a prefix is not a plan");
            assert!(error.0.starts_with("compileFromJSON: "), "{}", error.0);
        }
        let mut longer = STREAM.to_vec();
        longer.push(0.0);
        assert!(plan_from_parts(&longer, STRINGS).is_err(), "trailing numbers");
        for at in 0..STREAM.len() {
            for x in [-2.0, -1.0, -0.5, 0.0, 1.0, 2.0, 3.0, 4.0, 17.0, 1e300, f64::NAN, f64::INFINITY] {
                let mut garbled = STREAM;
                garbled[at] = x;
                let _ = plan_from_parts(&garbled, STRINGS);
            }
        }
        for strings in ["", "[", r#"["single"]"#, "[1]", r#"{"a":1}"#] {
            assert!(plan_from_parts(&STREAM, strings).is_err(), "{strings}");
        }
    }
}
